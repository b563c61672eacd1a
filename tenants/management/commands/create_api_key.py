from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenants.models import Tenant
from tenants.services import api_key_issue


class Command(BaseCommand):
    help = "Issue an API key for a tenant; the key is printed once, as the last line of output."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")
        parser.add_argument("--scope", default="write", choices=["read", "write"],
                            help="read: retrieve, bootstrap, answer and GETs; write: everything (default)")  # fmt: skip

    def handle(self, *args: Any, slug: str, name: str, scope: str = "write", **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise CommandError(f"No tenant with slug {slug!r}.")
        api_key, raw_key = api_key_issue(tenant=tenant, name=name, scope=scope)
        self.stdout.write(
            f"API key {api_key.prefix}… ({scope}) for tenant {tenant.slug}; store it now, it is not shown again."
        )
        self.stdout.write(raw_key)
