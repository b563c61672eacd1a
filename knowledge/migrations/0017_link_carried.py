"""Vault embeds carry the embedded note's access: links learn whether their text is in the note, and notes that
embed another one are enforced at the strictest of both lists until their vault's next sync renders them again."""

from django.db import migrations, models


def _stricter(old: list[str], new: list[str]) -> list[str]:  # knowledge.models.stricter_access, frozen here
    if "tenant" in new:
        return sorted(set(old))
    if "tenant" in old:
        return sorted(set(new))
    return sorted(set(old) & set(new))


def carried_until_rendered(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Every resolved embed of a note counts as carried (what was rendered before is not known); the note's enforced
    list takes the embedded notes' lists, and its next sync reads it again (no mtime) and sets the truth."""
    DocumentLink = apps.get_model("knowledge", "DocumentLink")
    Document = apps.get_model("knowledge", "Document")
    DocumentVersion = apps.get_model("knowledge", "DocumentVersion")
    links = DocumentLink.objects.filter(embed=True, resolved__isnull=False)
    links.update(carried=True)
    lists: dict[int, list[list[str]]] = {}
    for link in links.select_related("resolved__source"):
        target = link.resolved
        lists.setdefault(link.document_id, []).append(list(target.access if target.access is not None
                                                           else target.source.access))  # fmt: skip
    for document in Document.objects.filter(pk__in=list(lists)).select_related("source"):
        enforced = sorted(set(document.readers.split()))
        for access in lists[document.pk]:
            enforced = _stricter(enforced, access)
        if enforced != sorted(set(document.readers.split())):
            Document.objects.filter(pk=document.pk).update(readers=" " + " ".join(enforced) + " ", access_pending=True)
    DocumentVersion.objects.filter(document_id__in=list(lists), status="active").update(mtime=None)


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0016_chunk_defines"),
    ]

    operations = [
        migrations.AddField(
            model_name="documentlink",
            name="carried",
            field=models.BooleanField(
                default=False,
                help_text="The embed's text is in the note's served text (not a placeholder): the note's readers are "
                "limited to those the embedded note admits (enforced_access).",
            ),
        ),
        migrations.RunPython(carried_until_rendered, migrations.RunPython.noop),
    ]
