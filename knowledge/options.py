"""How an ingest job ingests: one options object from the form or the API to the pipeline, kept whole in
`job.params` (a retry or a recovered job runs with the same options). Plain data: every room may use it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class EnrichmentRequest:
    """A model reads each document and writes title, summary, topics, key points (ingest/enrichment.py)."""

    model_path: str
    model_name: str
    directives: str = ""


@dataclass(frozen=True)
class IngestOptions:
    """How a job ingests, the same object from the form or the API to the pipeline (kept whole in `job.params`)."""

    mode: str = "auto"  # auto | documental | code
    tags: tuple[str, ...] = ()
    critical: bool = False  # every document of the job is marked critical
    enrichment: EnrichmentRequest | None = None  # a model reads each document (title, summary, topics)

    def to_params(self) -> dict[str, Any]:
        return {"mode": self.mode, "tags": list(self.tags), "critical": self.critical,
                **({"enrichment": asdict(self.enrichment)} if self.enrichment else {})}  # fmt: skip

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> IngestOptions:
        params = params or {}
        enrichment = params.get("enrichment")
        return cls(
            mode=params.get("mode") or "auto",
            tags=tuple(params.get("tags") or ()),
            critical=bool(params.get("critical")),
            enrichment=EnrichmentRequest(**enrichment) if enrichment else None,
        )


DEFAULT_OPTIONS = IngestOptions()
