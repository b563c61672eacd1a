from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenants.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args: Any, slug: str, name: str, **options: Any) -> None:
        try:
            tenant = tenant_create(slug=slug, name=name)
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        self.stdout.write(f"Created tenant {tenant.slug} ({tenant.name}), id {tenant.public_id}")
