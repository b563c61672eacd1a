from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenants.models import Tenant
from tenants.services import group_create


class Command(BaseCommand):
    help = "Create a group of a tenant (its access principal is group:<name>)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="tenant slug")
        parser.add_argument("group", help="group name: lowercase letters, digits, - or _")

    def handle(self, *args: Any, tenant: str, group: str, **options: Any) -> None:
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"No tenant {tenant!r}.")
        try:
            created = group_create(tenant=found, name=group)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        self.stdout.write(f"Created group:{created.name} in {found.slug}")
