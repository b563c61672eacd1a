"""Optional model-assisted ingestion: a model reads a document and writes title, summary, topics, key points.

Runs inside the ingestion job, per document, only when the job asks for it (interactive ingest).
The result is stored on the document version and indexed as an extra "summary" chunk. A failing
or slow model marks that document's enrichment as failed; its plain chunks are indexed anyway.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass

logger = logging.getLogger(__name__)

READ_CHARS = 6000  # the opening of the document the model reads
ENRICH_MAX_TOKENS = 220
SECTION_RE = re.compile(r"^\s*(title|summary|topics|key points)\s*:\s*", re.IGNORECASE | re.MULTILINE)


@dataclass
class EnrichmentRequest:
    model_path: str
    model_name: str
    directives: str = ""


def enrichment_messages(*, title: str, text: str, directives: str) -> list[dict[str, str]]:
    rules = (
        "You index documents for a company knowledge base. Read the document and answer in exactly this form:\n"
        "Title: <a short descriptive title>\nSummary: <two or three sentences>\n"
        "Topics: <comma-separated topics>\nKey points:\n- <point>\n- <point>\n"
        "Only use what the document says."
    )
    if directives.strip():
        rules += f"\nAdministrator's directives: {directives.strip()}"
    return [
        {"role": "system", "content": rules},
        {"role": "user", "content": f"Document: {title}\n\n{text[:READ_CHARS]}"},
    ]


def parse(output: str) -> dict[str, object]:
    """Read the sections the model wrote; with no structure at all, the output is the summary."""
    parts = SECTION_RE.split(output)
    found: dict[str, str] = {}
    for index in range(1, len(parts) - 1, 2):
        found.setdefault(parts[index].lower(), parts[index + 1].strip())
    summary = found.get("summary") or " ".join(output.split())[:800]
    topics = [t.strip() for t in re.split(r"[,;\n]", found.get("topics", "")) if t.strip()][:10]
    points = [p.strip(" -*•\t") for p in found.get("key points", "").splitlines() if p.strip(" -*•\t")][:10]
    title = found.get("title", "").splitlines()[0][:200] if found.get("title") else ""
    return {"title": title, "summary": summary.strip(), "topics": topics, "key_points": points}


def enrich(*, request: EnrichmentRequest, title: str, text: str, timeout_s: float = 120.0) -> dict[str, object]:
    """Run the model; returns the enrichment record (status ok or failed, never raises)."""
    from chat.llm import ModelLoadError, get_gateway

    record: dict[str, object] = {"model": request.model_name, "directives": request.directives}
    started = time.perf_counter()
    try:
        model = get_gateway([request.model_path]).model()
        if model is None:
            raise ModelLoadError(get_gateway([request.model_path]).unavailable_reason())
        pieces = []
        for delta in model.stream(
            enrichment_messages(title=title, text=text, directives=request.directives),
            max_tokens=ENRICH_MAX_TOKENS, temperature=0.1, top_p=0.9,
        ):  # fmt: skip
            pieces.append(delta)
            if time.perf_counter() - started > timeout_s:
                raise TimeoutError(f"the model took longer than {timeout_s:.0f} s")
        output = "".join(pieces).strip()
        if not output:
            raise ValueError("the model wrote nothing")
        record.update(parse(output), status="ok", raw=output[:4000])
    except Exception as exc:  # enrichment is best effort: the document is indexed without it
        logger.warning("Enrichment of %s failed: %s", title, exc)
        record.update(status="failed", error=f"{type(exc).__name__}: {exc}")
    record["seconds"] = round(time.perf_counter() - started, 2)
    return record
