"""Optional model-assisted ingestion: a model reads a document and writes title, summary, topics, key points.

Runs inside the ingestion job, per document, only when the job asks for it (interactive ingest).
The result is stored on the document version and indexed as an extra "summary" chunk. A failing
or slow model marks that document's enrichment as failed; its plain chunks are indexed anyway.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from django.conf import settings

from knowledge.options import EnrichmentRequest

logger = logging.getLogger(__name__)

READ_CHARS = 6000  # the opening of the document the model reads
ENRICH_MAX_TOKENS = 600  # above the longest output the schema allows (about 1,800 characters)
# The output is generated under this schema (a llama.cpp grammar), so it always parses.
ENRICHMENT_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 200},
        "summary": {"type": "string", "maxLength": 500},
        "topics": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 6},
        "key_points": {"type": "array", "items": {"type": "string", "maxLength": 160}, "maxItems": 5},
    },
    "required": ["title", "summary", "topics", "key_points"],
}


def enrichment_messages(*, title: str, text: str, directives: str) -> list[dict[str, str]]:
    rules = (
        "You index documents for a company knowledge base. Read the document and reply with a JSON object: "
        '"title" (a short descriptive title), "summary" (two or three sentences), "topics" (a few short topics) '
        'and "key_points" (the main facts, one short sentence each). Only use what the document says.'
    )
    if directives.strip():
        rules += f"\nAdministrator's directives: {directives.strip()}"
    return [
        {"role": "system", "content": rules},
        {"role": "user", "content": f"Document: {title}\n\n{text[:READ_CHARS]}"},
    ]


def clean(output: dict[str, Any]) -> dict[str, object]:
    """The fields of the model's JSON, trimmed to what the index stores."""

    def strings(values: Any, limit: int) -> list[str]:
        return [str(v).strip() for v in (values or []) if str(v).strip()][:limit]

    return {
        "title": str(output.get("title") or "").strip().splitlines()[0][:200] if output.get("title") else "",
        "summary": " ".join(str(output.get("summary") or "").split())[:800],
        "topics": strings(output.get("topics"), 10),
        "key_points": strings(output.get("key_points"), 10),
    }


def enrich(*, request: EnrichmentRequest, title: str, text: str) -> dict[str, object]:
    """Run the model (through the model server: never in this process); returns the enrichment record (status
    ok or failed, never raises)."""
    from inference.llm import ModelLoadError, get_gateway

    record: dict[str, object] = {"model": request.model_name, "directives": request.directives}
    started = time.perf_counter()
    try:
        if request.model_path and not settings.RAG_LLM_URL and not Path(request.model_path).is_file():
            raise ModelLoadError(f"{Path(request.model_path).name}: no such file")
        gateway = get_gateway([request.model_path] if request.model_path else None)
        model = gateway.model()
        if model is None:
            raise ModelLoadError(gateway.unavailable_reason())
        if gateway.fallback_note():  # the model the admin chose is not the one that would write it
            raise ModelLoadError(gateway.fallback_note())
        output = model.complete_json(
            enrichment_messages(title=title, text=text, directives=request.directives),
            schema=ENRICHMENT_SCHEMA, max_tokens=ENRICH_MAX_TOKENS, timeout_s=settings.RAG_ENRICH_TIMEOUT_S,
        )  # fmt: skip
        fields = clean(output)
        if not fields["summary"]:
            raise ValueError("the model wrote no summary")
        record.update(fields, status="ok", raw=json.dumps(output, ensure_ascii=False)[:4000])
    except Exception as exc:  # enrichment is best effort: the document is indexed without it
        logger.warning("Enrichment of %s failed: %s", title, exc)
        record.update(status="failed", error=f"{type(exc).__name__}: {exc}")
    record["seconds"] = round(time.perf_counter() - started, 2)
    return record
