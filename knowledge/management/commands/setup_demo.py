from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from knowledge.ingest import pipeline
from knowledge.models import Document, IngestJob, Status
from tenants.models import Membership, Tenant
from tenants.services import membership_add, tenant_create

DEMO_DOCS = Path(settings.BASE_DIR) / "docs"  # ragsite's own documentation: a small real corpus to ask about
DEMO_SOURCE = "ragsite-docs"


class Command(BaseCommand):
    help = (
        "Create (once) a demo tenant and an admin user, load ragsite's own docs/ into the tenant (kept in sync "
        "on every run), and print how to sign in."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", default="demo")
        parser.add_argument("--username", default="admin")
        parser.add_argument("--no-docs", action="store_true", help="do not load docs/ into the demo tenant")

    def handle(self, *args: Any, tenant: str, username: str, no_docs: bool = False, **options: Any) -> None:
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
        if not no_docs and DEMO_DOCS.is_dir():
            self._load_docs(demo)

    def _load_docs(self, demo: Tenant) -> None:
        """Sync docs/ as the demo's folder source (unchanged files are skipped, so re-runs are quick)."""
        source = pipeline.folder_source_get_or_create(tenant=demo, name=DEMO_SOURCE, path=DEMO_DOCS)
        job = pipeline.sync_folder(source=source, root=DEMO_DOCS)
        if job.state == IngestJob.State.INDEXING:  # a running server owns the store and indexes it
            job = pipeline.wait_for_job(job)
        documents = Document.objects.for_tenant(demo).filter(source=source, status=Status.ACTIVE).count()
        self.stdout.write(f"Demo knowledge: {documents} documents of ragsite's docs/ in source {source.source_id}")
