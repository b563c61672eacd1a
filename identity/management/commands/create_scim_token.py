"""`manage.py create_scim_token <tenant> [--name N]`: a new SCIM bearer token for the tenant, printed as the last
line (shown once; only its hash is kept). The keys page makes one too."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from identity.scim import token_issue
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Make a SCIM 2.0 bearer token for a tenant (printed once, as the last line)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="The tenant's slug.")
        parser.add_argument("--name", default="", help="What the token is for (e.g. the identity provider).")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {options['tenant']!r}.")
        token, raw = token_issue(tenant=tenant, name=options["name"])
        self.stdout.write(f"SCIM base URL: /api/v1/tenants/{tenant.slug}/scim/v2/ (token {token.prefix}…)")
        self.stdout.write(raw)
