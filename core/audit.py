"""The audit stream: one JSON object per line for every sign-in (succeeded or refused), provisioning and membership
change, access change, API key use and "see as", for an operator to ship to a SIEM. RAG_AUDIT_LOG names the file
(default `var/audit.jsonl`), `-` sends the lines to stdout (a container's log), `off` writes none. The tenant's own
audit page (tenants.MembershipEvent) stays the admin's view; this is the operator's."""

from __future__ import annotations

import json
import logging
import logging.handlers
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

logger = logging.getLogger("ragsite.audit")


def audit(event: str, *, tenant: str = "", actor: str = "", outcome: str = "ok", **fields: Any) -> None:
    """Write one line: when, what (`sign_in`, `member.deprovisioned`, `key.used`…), in which tenant, by whom, with
    what outcome (`ok`, `refused`) and the event's own fields. Never a secret: callers pass prefixes, not keys."""
    record = {
        "at": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "event": event,
        "tenant": tenant,
        "actor": actor,
        "outcome": outcome,
        **{k: v for k, v in fields.items() if v not in (None, "")},
    }
    logger.info(json.dumps(record, default=str, ensure_ascii=False))


class JsonLinesFileHandler(logging.handlers.WatchedFileHandler):
    """The audit file: its folder made when missing, reopened when a log rotator moves it (WatchedFileHandler)."""

    def __init__(self, filename: str) -> None:
        Path(filename).parent.mkdir(parents=True, exist_ok=True)
        super().__init__(filename, encoding="utf-8", delay=True)


def handler_config(destination: str) -> dict[str, Any]:
    """The LOGGING handler for RAG_AUDIT_LOG's value."""
    if destination == "-":
        return {"class": "logging.StreamHandler", "formatter": "bare", "stream": "ext://sys.stdout"}
    if destination.lower() in {"off", "none", "0"}:
        return {"class": "logging.NullHandler"}
    return {"class": "core.audit.JsonLinesFileHandler", "formatter": "bare", "filename": destination}
