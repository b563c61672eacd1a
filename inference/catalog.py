"""The model catalog: what can be picked for chat or enrichment, whether it loads, how big it is."""

from __future__ import annotations

from pathlib import Path

from django.utils import timezone

from inference.models import ModelEntry


def catalog_register_packaged() -> None:
    """Register the instruct models that ship as packages, for chat and enrichment (idempotent).

    Paths are where `prepare_models` assembles them; an entry whose file is missing shows so on check."""
    from inference.packaged import PACKAGED_CHAT_CHAIN

    ModelEntry.objects.filter(packaged=True, name__startswith="gemma-3-270m").delete()  # a base model, retired
    for model in PACKAGED_CHAT_CHAIN:
        for kind, suffix in ((ModelEntry.Kind.CHAT, ""), (ModelEntry.Kind.ENRICHMENT, " enrichment")):
            ModelEntry.objects.update_or_create(
                name=f"{model.key}{suffix} (packaged)",
                defaults={"kind": kind, "path": str(model.target()), "packaged": True},
            )


def catalog_check(entry: ModelEntry) -> ModelEntry:
    """Read a GGUF's header and metadata (no weights, no llama.cpp in this process) and record size, context
    length and errors. Whether it generates is for the model server to find out, in its own process."""
    from inference.llm import ModelLoadError, gguf_info

    file = Path(entry.path)
    entry.checked_at = timezone.now()
    if not file.is_file():
        entry.loads, entry.load_error, entry.size_bytes = False, f"{entry.path}: no such file", None
    else:
        entry.size_bytes = file.stat().st_size
        try:
            entry.context_length = gguf_info(str(file)).context_length
            entry.loads, entry.load_error = True, ""
        except ModelLoadError as exc:  # corrupt, truncated or not a GGUF
            entry.loads, entry.load_error = False, str(exc)
    entry.save()
    return entry


def catalog_choices(kind: str) -> list[ModelEntry]:
    catalog_register_packaged()
    return list(ModelEntry.objects.filter(kind=kind).exclude(loads=False))
