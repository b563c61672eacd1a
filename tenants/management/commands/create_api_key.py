from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenants.models import Tenant
from tenants.principals import UnknownPrincipal, parse_principal_list
from tenants.services import api_key_issue


class Command(BaseCommand):
    help = "Issue an API key for a tenant; the key is printed once, as the last line of output."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")
        parser.add_argument("--scope", default="write", choices=["read", "write"],
                            help="read: retrieve, bootstrap, answer and GETs; write: everything (default)")  # fmt: skip
        parser.add_argument("--acts-for", dest="acts_for", default="tenant",
                            help="whose view the key reads with: tenant (default), principals such as "
                                 "group:hr,user:bob (resolved at each request), or all")  # fmt: skip

    def handle(self, *args: Any, slug: str, name: str, scope: str = "write", acts_for: str = "tenant",
               **options: Any) -> None:  # fmt: skip
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise CommandError(f"No tenant with slug {slug!r}.")
        try:
            api_key, raw_key = api_key_issue(
                tenant=tenant, name=name, scope=scope, acts_for=parse_principal_list(acts_for) or ["tenant"]
            )
        except UnknownPrincipal as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"API key {api_key.prefix}… ({scope}) for tenant {tenant.slug}, acting for {', '.join(api_key.acts_for)}; "
            "store it now, it is not shown again."
        )
        self.stdout.write(raw_key)
