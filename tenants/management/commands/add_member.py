from __future__ import annotations

import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenants.models import Membership, Tenant
from tenants.services import group_get, group_member_add, membership_add


class Command(BaseCommand):
    help = "Enrol a user in a tenant with a role (creating the account with --create). Operators only."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="tenant slug")
        parser.add_argument("username")
        parser.add_argument("--role", choices=Membership.Role.values, default=None,
                            help="staff (a new member's default) or admin; an existing member keeps theirs "
                                 "unless given")  # fmt: skip
        parser.add_argument(
            "--groups", default="", help="comma-separated groups of the tenant to add them to (hr,legal)"
        )
        parser.add_argument("--create", action="store_true", help="create the account; asks for its password")
        parser.add_argument("--email", default="")

    def handle(self, *args: Any, tenant: str, username: str, role: str | None, create: bool, email: str,
               groups: str = "", **o: Any) -> None:  # fmt: skip
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"No tenant {tenant!r}.")
        names = [g.strip().lower() for g in groups.split(",") if g.strip()]
        wanted = [group_get(tenant=found, name=name) for name in names]
        unknown = [name for name, group in zip(names, wanted, strict=True) if group is None]
        if unknown:  # before any account or membership is made
            raise CommandError(f"Unknown group {', '.join(repr(n) for n in unknown)} in tenant {found.slug} "
                               f"(create it: manage.py create_group {found.slug} {unknown[0]}).")  # fmt: skip
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
        existing = Membership.objects.for_tenant(found).filter(user=user).first()
        role = role or (existing.role if existing else Membership.Role.STAFF)
        try:
            membership_add(tenant=found, user=user, role=role)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        for group in wanted:
            assert group is not None
            group_member_add(tenant=found, actor=None, group=group, user=user)
        in_groups = f", in {', '.join('group:' + n for n in names)}" if names else ""
        self.stdout.write(f"{user.username} is {role} of {found.slug}{in_groups}")
