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
    """Try to open a GGUF's metadata (vocab only: no weights in memory) and record size, context and errors."""
    import llama_cpp

    file = Path(entry.path)
    entry.checked_at = timezone.now()
    if not file.is_file():
        entry.loads, entry.load_error, entry.size_bytes = False, f"{entry.path}: no such file", None
    else:
        entry.size_bytes = file.stat().st_size
        try:
            llama = llama_cpp.Llama(model_path=str(file), vocab_only=True, verbose=False)
            lengths = [int(v) for k, v in (llama.metadata or {}).items() if k.endswith(".context_length")]
            entry.context_length = lengths[0] if lengths else None
            entry.loads, entry.load_error = True, ""
            del llama
        except Exception as exc:  # corrupt, truncated or not a GGUF
            entry.loads, entry.load_error = False, f"{type(exc).__name__}: {exc}"
    entry.save()
    return entry


def catalog_choices(kind: str) -> list[ModelEntry]:
    catalog_register_packaged()
    return list(ModelEntry.objects.filter(kind=kind).exclude(loads=False))
