"""Score the tenant's own evaluation set, in process, with the definitions of the public harness
(shared/eval/run_eval.py and answer_eval.py): recall@5 and MRR@10 over document keys for retrieval; cite_rel,
ans_phrase, false_abst, answered_wrong and abstain for answers. A refusal is an answer whose status says the
excerpts lack it (not_verified, not_found, no_evidence) or whose words say so (knowledge.claims.says_not_found)."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from django.conf import settings

from chat import excerpts
from chat import services as chat_services
from core.errors import error_reference
from feedback import runs
from feedback.models import EvalQuestion, EvalRun, Fix, VerifierCase
from inference.embedders import get_embedder
from knowledge import selectors
from knowledge.claims import fold, says_not_found, unsupported
from knowledge.search.retrieval import retrieve
from knowledge.shapes import StoreBusy
from tenants.models import Tenant
from tenants.principals import Viewer

logger = logging.getLogger(__name__)

RETRIEVE_TOP_K = 10
REFUSED = {"not_found", "not_verified", "no_evidence"}
METRICS = ("recall@5", "mrr@10", "cite_rel", "ans_phrase", "false_abst", "answered_wrong", "abstain")
SHOWN_METRICS = (*METRICS, "verifier_caught")  # the runs table: the questions' metrics, then the verifier cases' one


def contains_phrase(text: str, phrase: str) -> bool:
    """Case-, accent-, quote- and space-insensitive containment, as the public harness checks it."""
    wanted, body = fold(phrase).strip(), fold(text)
    if not wanted:
        return False
    return (
        wanted in body
        or wanted in re.sub(r"(\w)- (\w)", r"\1\2", body)
        or wanted.replace(" ", "") in body.replace(" ", "")
    )


def _key(key: Any) -> str:
    """A document key as the public harness compares them (its norm_key): slashes, no leading "./" or "/"."""
    key = str(key or "").replace("\\", "/").strip()
    while key.startswith("./"):
        key = key[2:]
    return key.lstrip("/")


def score_question(tenant: Tenant, q: EvalQuestion, *, answers: bool) -> dict[str, Any]:
    """One question of the tenant's own set, as its admins (who run evaluations) see the knowledge: all of it."""
    row: dict[str, Any] = {"question": q.question, "answerable": q.answerable, "uuid": str(q.public_id)}
    relevant = {_key(k) for k in q.relevant_docs}
    try:
        hits = retrieve(viewer=Viewer.everything(tenant), query=q.question, top_k=RETRIEVE_TOP_K)
    except StoreBusy:
        raise  # not this question's fault: this process cannot search (another owns the embedded store)
    except Exception as exc:  # one failing question is a miss, recorded; the run goes on
        row["error"] = f"retrieve: {type(exc).__name__}"
        hits = []
    keys = [_key(hit.chunk.document.display_key) for hit in hits]
    row["retrieved"] = keys
    if q.answerable and relevant:
        ranks = [n for n, key in enumerate(keys, 1) if key in relevant]
        row["recall@5"] = 1.0 if ranks and ranks[0] <= 5 else 0.0
        row["mrr@10"] = 1.0 / ranks[0] if ranks else 0.0
    if not answers:
        return row
    started = time.perf_counter()
    try:
        result = chat_services.answer_question(viewer=Viewer.everything(tenant), question=q.question,
                                               options=excerpts.AnswerSettings.from_assistant(None))  # fmt: skip
    except StoreBusy:
        raise
    except Exception as exc:
        row["error"] = f"answer: {type(exc).__name__}: {exc}"[:300]
        return row
    refused = result.status in REFUSED or says_not_found(result.answer)
    cited = [_key(c.get("document_key")) for c in result.citations]
    row.update({"answer": result.answer[:2000], "status": result.status, "model": result.model, "cited": cited,
                "refused": refused, "ms": round((time.perf_counter() - started) * 1000)})  # fmt: skip
    if q.answerable:
        if relevant:
            row["cite_rel"] = 1.0 if any(key in relevant for key in cited) else 0.0
        if q.answer:
            phrase = contains_phrase(result.answer, q.answer)
            row["ans_phrase"] = 1.0 if phrase else 0.0
            row["answered_wrong"] = 1.0 if not refused and not phrase else 0.0
        row["false_abst"] = 1.0 if refused else 0.0
    else:
        row["abstain"] = 1.0 if refused else 0.0
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each metric is the mean over the questions it applies to; its `n_` says how many those were."""
    summary: dict[str, Any] = {"questions": len(rows), "errors": sum(1 for r in rows if r.get("error"))}
    for metric in METRICS:
        values = [r[metric] for r in rows if metric in r]
        summary[metric] = round(sum(values) / len(values), 3) if values else None
        summary[f"n_{metric}"] = len(values)
    return summary


def verifier_scores(tenant: Tenant) -> dict[str, Any]:
    """The tenant's verifier cases (claims an answer misread from their excerpt): the share the claim checks now
    refuse against that excerpt, and the claims they still let through."""
    cases = list(VerifierCase.objects.for_tenant(tenant))
    if not cases:
        return {}
    embed = get_embedder().embed
    missed = [case.claim for case in cases if case.claim not in unsupported([case.claim], case.excerpt, embed=embed)]
    return {"verifier_cases": len(cases), "verifier_caught": round(1 - len(missed) / len(cases), 3),
            "n_verifier_caught": len(cases), "verifier_missed": missed[:20]}  # fmt: skip


def system_context(tenant: Tenant, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the system was during the run: the plot marks a point where any of this changed."""
    index = selectors.index_state(viewer=Viewer.everything(tenant))
    models = sorted({r["model"] for r in rows if r.get("model")})
    embedder = get_embedder().identity
    return {
        "model": ", ".join(models) or ("(retrieval only)" if not any("status" in r for r in rows) else "(no model)"),
        "embedder": f"{embedder.provider}/{embedder.model}",
        "live_documents": index["live_documents"],
        "index_changed_at": index["changed_at"],
        "fixes": Fix.objects.for_tenant(tenant).count(),
        "critical_boost": settings.RAG_CRITICAL_BOOST,
    }


def evaluation_run(run: EvalRun) -> EvalRun:
    """Run the tenant's whole evaluation set; the run ends done or failed (with the reason), never stays running.
    In a process that cannot search (the web server owns the embedded store) it goes back to the queue, for the
    web server's runner (feedback/runner.py)."""
    tenant = run.tenant
    runs.start(run)
    try:
        questions = list(EvalQuestion.objects.for_tenant(tenant).order_by("created_at", "pk"))
        rows = []
        for q in questions:
            rows.append(score_question(tenant, q, answers=run.answers))
            runs.heartbeat(run)  # alive: see runs.fail_silent
        runs.done(run, results=rows, context=system_context(tenant, rows),
                  metrics={**summarise(rows), **verifier_scores(tenant)})  # fmt: skip
    except StoreBusy:
        runs.requeue(run)
    except Exception:
        reference = error_reference()
        logger.exception("Evaluation run %s failed (ref %s)", run.public_id, reference)
        runs.fail(run, f"The run failed; the error was logged (reference {reference}).")
    return run
