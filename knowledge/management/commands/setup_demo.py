from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from tenants.models import Membership, Tenant
from tenants.services import membership_add, tenant_create


class Command(BaseCommand):
    help = "Create (once) a demo tenant and an admin user, and print how to sign in."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", default="demo")
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, tenant: str, username: str, **options: Any) -> None:
        demo = Tenant.objects.filter(slug=tenant).first() or tenant_create(slug=tenant, name="Demo company")
        credentials = Path(settings.DATA_DIR) / "admin-credentials.txt"
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            password = secrets.token_urlsafe(12)
            user = User.objects.create_superuser(username=username, email="", password=password)
            credentials.write_text(f"{username}\n{password}\n", encoding="utf-8")
            os.chmod(credentials, 0o600)
        membership_add(tenant=demo, user=user, role=Membership.Role.ADMIN)
        if credentials.exists():
            saved_user, password = credentials.read_text(encoding="utf-8").split("\n")[:2]
            self.stdout.write(f"Admin user: {saved_user}  password: {password}  (saved in {credentials})")
        else:
            self.stdout.write(f"Admin user: {username} (password set earlier; not stored by ragsite)")
        self.stdout.write(f"Demo tenant: {demo.slug}")
