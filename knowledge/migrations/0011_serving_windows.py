"""Versions served before windows existed: served from their creation until their status last changed. A migration of
its own: on PostgreSQL, the previous one's indexes are created at its end, which rows updated in the same
transaction would block ("pending trigger events")."""

from django.db import migrations


def serving_windows(apps, schema_editor):
    """Versions served before windows existed: from their creation until their status last changed; documents with
    an older or a retired version get their payloads' windows from the indexer (needs_sync)."""
    DocumentVersion = apps.get_model("knowledge", "DocumentVersion")
    Document = apps.get_model("knowledge", "Document")
    served = ["active", "superseded", "retired"]
    for version in DocumentVersion.objects.filter(status__in=served).only("created_at", "status", "status_changed_at"):
        until = None if version.status == "active" else version.status_changed_at
        DocumentVersion.objects.filter(pk=version.pk).update(served_from=version.created_at, served_until=until)
    for document_pk, created in DocumentVersion.objects.filter(status="active").values_list(
        "document_id", "created_at"
    ):
        Document.objects.filter(pk=document_pk).update(content_changed_at=created)
    with_history = DocumentVersion.objects.filter(status__in=["superseded", "retired"]).values("document_id")
    Document.objects.filter(pk__in=with_history).update(needs_sync=True)



class Migration(migrations.Migration):
    dependencies = [("knowledge", "0010_validity")]

    operations = [migrations.RunPython(serving_windows, migrations.RunPython.noop)]
