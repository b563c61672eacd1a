from __future__ import annotations

import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenants.models import Membership, Tenant
from tenants.services import membership_add


class Command(BaseCommand):
    help = "Enrol a user in a tenant with a role (creating the account with --create). Operators only."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="tenant slug")
        parser.add_argument("username")
        parser.add_argument("--role", choices=Membership.Role.values, default=Membership.Role.STAFF)
        parser.add_argument("--create", action="store_true", help="create the account; asks for its password")
        parser.add_argument("--email", default="")

    def handle(self, *args: Any, tenant: str, username: str, role: str, create: bool, email: str, **o: Any) -> None:
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"No tenant {tenant!r}.")
        users = get_user_model().objects
        user = users.filter(username=username).first()
        if user is None and not create:
            raise CommandError(f"No user {username!r}; pass --create to make the account.")
        if user is None:
            password = getpass.getpass(f"Password for {username}: ")
            candidate = get_user_model()(username=username, email=email)
            try:
                validate_password(password, candidate)
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from exc
            user = users.create_user(username=username, email=email, password=password)
        try:
            membership_add(tenant=found, user=user, role=role)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        self.stdout.write(f"{user.username} is {role} of {found.slug}")
