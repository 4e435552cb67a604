"""Stage 7 — the evaluation run: index a folder, predict every question, keep a trace of each.

A question that fails (e.g. a model server down) gets its error in its trace
record, an empty answer in ``submission.csv`` and is counted (``failed``); the
run goes on. After ``give_up_after`` timeouts in a row the rest are not tried.
"""
from __future__ import annotations

import csv
import json
import logging
import time
from pathlib import Path
from typing import Callable, Iterable, TypedDict

from ..answering.answer import evidence_page
from ..checks import check_question
from ..errors import BackendTimeout, IngestError
from ..index import Library
from ..documents.ingest import check_size
from ..qa import Asker
from ..types import Candidate, Question, Search
from .metric import calibration, gold_rank, metrics, percentile
from .questions import has_gold

log = logging.getLogger(__name__)


class TraceRecord(TypedDict, total=False):
    """One question's line in ``trace.jsonl`` (what the web app's Evaluate tab reads back)."""

    Question_ID: str
    answer: str  # the letter, "" when not answered
    probabilities: dict[str, float]
    doc: str | None  # predicted document (file name) and page
    page: int | None
    timings: dict[str, float]  # seconds per stage
    candidates: list[dict]  # after reranking: rank, chunk_id, doc, pages, scores
    gold: dict  # answer, doc, page (with gold columns)
    gold_rank: dict  # the gold page's rank after retrieval and after reranking
    letter_probs: dict[str, float]
    option_probs: dict[str, float]
    prompt_tokens: int
    retried: bool
    evidence: list[str]  # chunk ids given to the answer model
    order_check: dict  # with settings.answer.order_check: each order's answer and probabilities, and "stable"
    error: str  # "Type: message" when the question failed
    not_tried: bool
    seconds: float


def index_folder(library: Library, pdfs: Iterable[Path], say: Callable[[str], None] = print) -> dict:
    """Add every PDF, then wait until all are embedded; a bad one is reported and skipped, never stops the batch."""
    report = {"indexed": [], "failed": {}, "seconds": 0.0}
    t0 = time.perf_counter()
    files = sorted(pdfs)
    for i, f in enumerate(files, 1):
        try:
            check_size(f.name, f.stat().st_size, library.settings.limits.max_upload_mb)
            info = library.add(f.read_bytes(), f.name, wait=False)
            report["indexed"].append(info.name)
            say(f"[{i}/{len(files)}] {f.name}: {'already indexed' if info.duplicate else f'{info.n_pages} pages, {info.n_chunks} chunks'}")
        except Exception as e:  # a bad file, an unreadable one, or a model server failing: this file only
            msg = str(e) if isinstance(e, IngestError) else f"{f.name}: {type(e).__name__}: {e}"
            if not isinstance(e, (IngestError, OSError)):
                log.warning("indexing %s failed", f.name, exc_info=True)
            report["failed"][f.name] = msg
            say(f"[{i}/{len(files)}] {f.name}: FAILED — {msg}")
    library.wait_indexed()  # every document searchable; the questions wait for all vectors (same results)
    report["seconds"] = time.perf_counter() - t0
    return report


def candidate_record(c: Candidate) -> dict:
    """A candidate as a trace records it (the batch runs' and the benchmarks')."""
    return {"rank": c.rank, "chunk_id": c.chunk.chunk_id, "doc": c.chunk.doc_name, "pages": c.chunk.pages,
            "scores": {k: round(v, 5) for k, v in c.scores.items() if isinstance(v, float)}}


def _predict(pipe: Asker, q: Question, rec: TraceRecord, answer: bool, orders: int = 0) -> None:
    """Fill ``rec`` for one question; what is found before a failure stays in it (a question over the
    length limits fails at once with :class:`~pipeline.errors.QuestionError`)."""
    check_question(q.text, q.options, pipe.settings)

    def searched(found: Search) -> None:  # recorded before the answer model is asked
        top = found.top
        rec.update(answer="", probabilities={}, doc=top.chunk.doc_name if top else None,
                   page=evidence_page(top, q, None) if top else None, timings=dict(found.timings),
                   candidates=[candidate_record(c) for c in found.reranked])
        if has_gold(q):
            rec["gold"] = {"answer": q.gold_answer, "doc": q.gold_doc, "page": q.gold_page}
        if q.gold_doc:  # a question whose answer is in no document has no gold page to rank
            rec["gold_rank"] = {"retrieval": gold_rank(list(found.retrieved), q),
                                "rerank": gold_rank(list(found.reranked), q)}

    if not answer:
        searched(pipe.search(q))
        return
    a = pipe.ask(q, lambda stage, result: searched(result) if stage == "search" else None, orders=orders)
    rec.update(answer=a.letter, probabilities=a.probabilities, doc=a.doc_name, page=a.page, timings=a.timings,
               letter_probs=a.details["letter"], option_probs=a.details["option"],
               prompt_tokens=a.details["prompt_tokens"], retried=a.details["retried"],
               evidence=[c.chunk.chunk_id for c in a.evidence])
    rec.update({k: a.details[k] for k in ("order_check", "features", "not_in_documents", "not_in_documents_score",
                                          "flag_basis", "flag_features", "lexical_only_docs") if k in a.details})


def evaluate(pipe: Asker, questions: list[Question], out: Path | None = None, answer: bool = True,
             progress: Callable[[int, int, dict], None] | None = None,
             give_up_after: int = 3, extra: dict | None = None,
             write_metrics: bool = True, orders: int | None = None) -> tuple[dict, list[TraceRecord]]:
    """Predict every question; a question that fails is recorded as failed, the batch goes on.

    With ``out``, writes ``submission.csv``, ``trace.jsonl`` (as it goes) and ``metrics.json`` (the
    result with ``extra`` added; not written when ``write_metrics`` is false: the caller writes it).

    A failed question keeps what was found before the failure (the retrieved document and page when
    only the answer model failed) and its trace gets ``error``. After ``give_up_after`` questions in a
    row time out on a model server, the rest are not tried: each is recorded as failed with that
    timeout's message (``not_tried``), so a dead server costs a few timeouts, not one per question.
    """
    orders = pipe.settings.answer.order_check if orders is None else orders  # > 1: the option-order check per question
    n_pages = {d.name: d.n_pages for d in pipe.library.documents()}
    rows: list[dict] = []
    traces: list[TraceRecord] = []
    live = None
    if out:  # the trace grows as the run goes, so a long run can be followed (and survives a crash)
        out.mkdir(parents=True, exist_ok=True)
        live = open(out / "trace.jsonl", "w", encoding="utf-8")
    ks = (1, 2, 5, 20)
    timeouts, down = 0, ""
    for i, q in enumerate(questions, 1):
        t0 = time.perf_counter()
        rec: TraceRecord = {"Question_ID": q.qid}
        if down:
            rec.update(error=down, not_tried=True)
        else:
            try:
                _predict(pipe, q, rec, answer, orders)
                timeouts = 0
            except Exception as e:  # one failed question never stops the batch
                rec["error"] = f"{type(e).__name__}: {e}"
                timeouts = timeouts + 1 if isinstance(e, BackendTimeout) else 0
                if timeouts >= give_up_after:
                    down = f"{rec['error']} (not tried: {timeouts} questions in a row timed out on it)"
        rec["seconds"] = time.perf_counter() - t0
        traces.append(rec)
        if live:
            live.write(json.dumps(rec, ensure_ascii=False) + "\n")
            live.flush()
        rows.append({"Question_ID": q.qid, "Correct_Answer": rec.get("answer", ""), "Doc_ID": rec.get("doc") or "",
                     "Page_Num": rec.get("page") or ""})
        if progress:
            progress(i, len(questions), rec)
    result: dict = {"n_questions": len(questions), "failed": sum("error" in t for t in traces),
                    "not_tried": sum("not_tried" in t for t in traces)}
    gold = [(q, t) for q, t in zip(questions, traces) if has_gold(q)]
    if gold:
        m = metrics([{"pred_answer": t.get("answer"), "gold_answer": q.gold_answer, "pred_doc": t.get("doc"),
                      "gold_doc": q.gold_doc, "pred_page": t.get("page"), "gold_page": q.gold_page,
                      "gold_n_pages": n_pages.get(q.gold_doc, 0),
                      "pred_not_found": bool(t.get("not_in_documents")) and "error" not in t} for q, t in gold])
        if not answer:
            m.pop("answer_accuracy")
            m.pop("score")
        result.update(m)
        result.update(calibration([(t.get("probabilities"), t.get("answer"), q.gold_answer) for q, t in gold]))
        paged = [(q, t) for q, t in gold if q.gold_doc]  # recall of the gold page: questions that have one
        for stage in ("retrieval", "rerank") if paged else ():
            for k in ks:
                result[f"recall@{k}_{stage}"] = sum(
                    1 for _, t in paged if (t.get("gold_rank") or {}).get(stage) and t["gold_rank"][stage] <= k) \
                    / len(paged)
    result.update(seconds_summary(traces))
    result.update(extra or {})
    if live:
        live.close()
        write_outputs(out, rows, traces, result if write_metrics else None)
    return result, traces


SUBMISSION = ["Question_ID", "Correct_Answer", "Doc_ID", "Page_Num"]


def seconds_summary(traces: list[dict]) -> dict:
    """p50 and p95 of the traces' seconds per question (nothing when there are none)."""
    secs = [t["seconds"] for t in traces]
    return {"p50_seconds": percentile(secs, 0.5), "p95_seconds": percentile(secs, 0.95)} if secs else {}


def write_outputs(out: Path, rows: list[dict], traces: list[dict], result: dict | None,
                  fields: list[str] = SUBMISSION) -> None:
    """``submission.csv`` (columns ``fields``), ``trace.jsonl`` and (given ``result``) ``metrics.json``
    under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "submission.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    with open(out / "trace.jsonl", "w", encoding="utf-8") as f:
        for t in traces:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    if result is not None:
        (out / "metrics.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
