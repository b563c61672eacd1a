"""Plain builders for test data."""

from __future__ import annotations

import hashlib
import io
import itertools
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from knowledge import ids
from knowledge.models import Chunk, Document, DocumentVersion, Source
from knowledge.services import source_default_get
from tenants.models import Membership, Tenant
from tenants.principals import Viewer
from tenants.services import membership_add, tenant_create

_counter = itertools.count(1)


def make_tenant(*, slug: str, name: str = "") -> Tenant:
    return tenant_create(slug=slug, name=name or slug.title())


def make_user(*, username: str | None = None, password: str = "pw-for-tests-123", **extra: object) -> AbstractBaseUser:
    username = username or f"user{next(_counter)}"
    return get_user_model().objects.create_user(username=username, password=password, **extra)


def make_member(tenant: Tenant, *, role: str = Membership.Role.STAFF, username: str | None = None) -> AbstractBaseUser:
    user = make_user(username=username)
    membership_add(tenant=tenant, user=user, role=role)
    return user


def make_document(
    *, tenant: Tenant, source: Source | None = None, key: str = "", text: str = "Some text.", chunks: int = 1
) -> Document:
    """A document with one active version holding `chunks` chunks of `text`."""
    source = source or source_default_get(tenant=tenant)
    key = key or f"doc-{next(_counter)}.md"
    document = Document.objects.create(
        tenant=tenant,
        source=source,
        document_key=ids.normalise_document_key(key),
        document_id=ids.document_id(source.source_id, key),
        source_path=key,
        source_type="markdown",
        title=key,
        version=1,
    )
    digest = hashlib.sha256(text.encode()).hexdigest()
    version = DocumentVersion.objects.create(
        tenant=tenant, document=document, version=1, content_hash=digest, size=len(text), chunk_count=chunks
    )
    for index in range(chunks):
        Chunk.objects.create(
            tenant=tenant,
            document=document,
            document_version=version,
            chunk_id=ids.chunk_id(document.document_id, "documental", index),
            index=index,
            mode="documental",
            text=text,
            content_hash=digest,
            line_start=1,
            line_end=1,
        )
    return document


def make_folder_source(*, tenant: Tenant, root: Path, files: dict[str, str], name: str = "") -> Source:
    """Write `files` (relative path → text) under root and ingest the folder as a source, synchronously."""
    from knowledge.ingest import pipeline

    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    source = pipeline.folder_source_get_or_create(tenant=tenant, name=name or root.name, path=root)
    pipeline.sync_folder(source=source, root=root)
    return source


class CommittingClientMixin:
    """Run the on-commit hooks a request registers (queued jobs, payload syncs): a test's transaction never commits."""

    def request(self, **kwargs):  # type: ignore[no-untyped-def]
        from django.test import TestCase

        with TestCase.captureOnCommitCallbacks(execute=True):
            return super().request(**kwargs)  # type: ignore[misc]


def make_pdf(pages: list[list[str]]) -> bytes:
    """A real PDF (Helvetica text, one line per string) with the given pages, written by hand: no PDF library
    in the runtime writes text, and a fixture file would hide what the test depends on."""
    objects: list[bytes] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for lines in pages:
        escaped = [line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for line in lines]
        body = "BT /F1 12 Tf 72 720 Td 16 TL " + " ".join(f"({line}) '" for line in escaped) + " ET"
        content_number = len(objects) + 2
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_number} 0 R "
                       f"/Resources << /Font << /F1 3 0 R >> >> >>".encode())  # fmt: skip
        objects.append(f"<< /Length {len(body)} >>\nstream\n{body}\nendstream".encode())
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def make_answer(tenant: Tenant, *, question: str = "How long is the warranty?", user: Any = None,
                api_key: Any = None) -> Any:  # fmt: skip
    """An answer as chat.records keeps it, from a real retrieval of this tenant's index (hits with ranks)."""
    from chat.models import AnswerRecord
    from chat.records import answer_record
    from chat.services import Answer
    from knowledge.search.retrieval import retrieve

    hits = retrieve(viewer=Viewer.everything(tenant), query=question, top_k=5)
    result = Answer(answer="The documents available to me do not contain the answer to this question.",
                    generated=True, model="test.gguf", status="not_found", citations=[], hits=hits)  # fmt: skip
    record = answer_record(
        viewer=Viewer.everything(tenant), question=question, result=result, channel="chat", user=user, api_key=api_key
    )
    assert isinstance(record, AnswerRecord)
    return record


def rewrite_points_without(fields: tuple[str, ...]) -> None:
    """Rewrite every point of the store without these payload fields, as a store written before they existed
    holds them (the upgrade tests)."""

    from knowledge.index.indexer import chunk_payload, point_vectors, version_identity
    from knowledge.index.vectorstore import StorePoint, get_store
    from knowledge.models import DocumentVersion

    store = get_store()
    for version in DocumentVersion.objects.select_related("document__tenant", "document__source"):
        points = []
        for chunk in version.chunks.select_related("document_version"):
            payload = chunk_payload(chunk=chunk, document=version.document, status=chunk.status, doc_tags=[],
                                    chunk_tags=[], first=True)  # fmt: skip
            for name in fields:
                payload.pop(name, None)
            dense, multilingual = point_vectors(chunk, version_identity(version))
            points.append(StorePoint(chunk.point_id, dense, (chunk.sparse["i"], chunk.sparse["v"]), payload,
                                     multilingual))  # fmt: skip
        store.upsert(version_identity(version), points)


FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def page_image(lines: list[str]):  # type: ignore[no-untyped-def]
    """A scanned page: the lines drawn on an A4-ish image at 200 dpi, no text layer."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(FONT, 40)
    for n, line in enumerate(lines):
        draw.text((150, 200 + n * 70), line, fill=0, font=font)
    return image


def scanned_pdf(pages: list[list[str]]) -> bytes:
    """A PDF of page images only: what a scanner writes (OCR must read it)."""
    images = [page_image(lines) for lines in pages]
    buffer = io.BytesIO()
    images[0].save(buffer, format="PDF", save_all=True, append_images=images[1:], resolution=200)
    return buffer.getvalue()
