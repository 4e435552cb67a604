"""Batch and metrics for free-form questions (no options), run by ``python -m pipeline.evaluate``.

    python -m pipeline.evaluate --pdfs DIR --questions CSV --out DIR [--set free_verify=false]

A questions CSV without option columns (A–F) is free-form: ``Question_ID,
Question`` and, for scoring, ``Answer`` (an empty cell: the question is
unanswerable from the documents), optionally ``Doc_ID, Page_Num``. Writes
``submission.csv`` (Question_ID, Answer, Doc_ID, Page_Num; an empty Answer for
an abstention), ``metrics.json``, ``trace.jsonl``.

Metrics: exact match and token F1 after normalisation (case, punctuation,
Ukrainian apostrophes ’ ' ʼ unified) on the answerable questions (an abstention
scores 0), document and page accuracy on those with a gold document,
abstention rate on answerable ones, and abstention precision/recall for the
unanswerable ones.
"""
from __future__ import annotations

import csv
import io
import time
from pathlib import Path
from typing import Callable

from ..errors import QuestionsError
from ..answering.freeform import FreeAnswer
from ..qa import Asker
from ..types import LETTERS, Question
from .questions import _columns, _delimiter, _page, decode, finish, question_rows
from .run import candidate_record, seconds_summary, write_outputs
from .scoring import exact_match, token_f1

REQUIRED = ["Question_ID", "Question"]
GOLD = ["Answer", "Doc_ID", "Page_Num"]
def is_free_form(data: bytes | str) -> bool:
    """Whether a questions file is free-form: its header names no option column (A–F)."""
    text = decode(data)[0] if isinstance(data, bytes) else data.lstrip("\ufeff")
    first = text.split("\n", 1)[0]
    header = next(csv.reader([first], delimiter=_delimiter(first, REQUIRED + GOLD + list(LETTERS))), [])
    return not {h.strip().casefold() for h in header} & {L.casefold() for L in LETTERS}


def read_free_questions(data: bytes | str, max_questions: int | None = None) -> tuple[list[Question], list[str]]:
    """Questions from a free-form CSV and notes on skipped rows. ``gold_answer`` is the ``Answer`` cell
    ("" = unanswerable) or None when the file has no ``Answer`` column; ``options`` is empty."""
    text, problems = decode(data) if isinstance(data, bytes) else (data.lstrip("\ufeff"), [])
    reader = csv.reader(io.StringIO(text), delimiter=_delimiter(text.split("\n", 1)[0], REQUIRED + GOLD))
    try:
        header = [h.strip() for h in next(reader, [])]
        col = _columns(header, REQUIRED, GOLD, "Question_ID, Question, and for scoring Answer "
                                               "(empty = unanswerable), Doc_ID, Page_Num")
        used = [(c, i) for c, i in col.items() if c in REQUIRED + GOLD]
        questions = [Question(get["Question_ID"], get["Question"], [], get["Answer"] if "Answer" in col else None,
                              get.get("Doc_ID") or None, _page(get.get("Page_Num", "")))
                     for get in question_rows(reader, used, problems)]
    except csv.Error as e:
        raise QuestionsError(f"the questions file is not valid CSV at line {reader.line_num}: {e}") from None
    return finish(questions, problems, max_questions)


def free_metrics(rows: list[dict]) -> dict:
    """Rows with ``pred`` ("" = abstained), ``gold`` ("" = unanswerable), and optionally pred/gold doc and page."""
    ans = [r for r in rows if r["gold"]]
    un = [r for r in rows if not r["gold"]]
    abst = [r for r in rows if not r["pred"]]
    out: dict = {"n": len(rows), "n_answerable": len(ans), "n_unanswerable": len(un)}
    if ans:
        out["f1"] = sum(token_f1(r["pred"], r["gold"]) for r in ans) / len(ans)
        out["exact_match"] = sum(exact_match(r["pred"], r["gold"]) for r in ans) / len(ans)
        out["abstained_answerable"] = sum(not r["pred"] for r in ans) / len(ans)
        answered = [r for r in ans if r["pred"]]
        out["f1_when_answered"] = (sum(token_f1(r["pred"], r["gold"]) for r in answered) / len(answered)
                                   if answered else 0.0)
        located = [r for r in ans if r.get("gold_doc")]
        if located:
            out["doc_accuracy"] = sum(r.get("pred_doc") == r["gold_doc"] for r in located) / len(located)
            out["page_accuracy"] = sum(r.get("pred_doc") == r["gold_doc"] and r.get("pred_page") == r["gold_page"]
                                       for r in located) / len(located)
    if un:
        out["abstention_recall"] = sum(not r["pred"] for r in un) / len(un)
    if abst:
        out["abstention_precision"] = sum(not r["gold"] for r in abst) / len(abst)
    return out


def trace_of(q: Question, a: FreeAnswer) -> dict:
    return {"Question_ID": q.qid, "answer": a.text, "abstained": a.abstained, "reasons": a.reasons,
            "doc": a.doc_name, "page": a.page, "grounding": a.grounding, "timings": a.timings,
            "evidence_chunk": a.evidence_chunk.chunk.chunk_id if a.evidence_chunk else None,
            "candidates": [candidate_record(c) for c in a.candidates[:10]],
            "tries": a.details.get("tries", []),
            **{k: a.details[k] for k in ("not_in_documents", "not_in_documents_score", "flag_basis", "lexical_only_docs")
               if k in a.details}}


def evaluate_free(pipe: Asker, questions: list[Question], out: Path | None = None,
                  progress: Callable[[int, int, dict], None] | None = None,
                  extra: dict | None = None) -> tuple[dict, list[dict]]:
    """Answer every question (a failure is recorded, the batch goes on); metrics when gold answers are given
    (``extra`` is added to them)."""
    traces = []
    for i, q in enumerate(questions, 1):
        t0 = time.perf_counter()
        try:
            rec = trace_of(q, pipe.ask(Question(q.qid, q.text, [], q.gold_answer, q.gold_doc, q.gold_page)))
        except Exception as e:  # one failed question never stops the batch
            rec = {"Question_ID": q.qid, "answer": "", "abstained": True, "error": f"{type(e).__name__}: {e}"}
        rec["seconds"] = time.perf_counter() - t0
        if q.gold_answer is not None:
            rec["gold"] = {"answer": q.gold_answer, "doc": q.gold_doc, "page": q.gold_page}
        traces.append(rec)
        if progress:
            progress(i, len(questions), rec)
    result: dict = {"n_questions": len(questions), "failed": sum("error" in t for t in traces)}
    scored = [(q, t) for q, t in zip(questions, traces) if q.gold_answer is not None]
    if scored:
        result.update(free_metrics([{"pred": t["answer"], "gold": q.gold_answer, "pred_doc": t.get("doc"),
                                     "gold_doc": q.gold_doc, "pred_page": t.get("page"), "gold_page": q.gold_page}
                                    for q, t in scored]))
    result.update(seconds_summary(traces))
    result.update(extra or {})
    if out:
        write_free_outputs(out, traces, result)
    return result, traces


def write_free_outputs(out: Path, traces: list[dict], result: dict) -> None:
    """The six-option batch's outputs (``run.write_outputs``) with an Answer column (empty, with no document or
    page, for "not found")."""
    rows = [{"Question_ID": t["Question_ID"], "Answer": t["answer"],
             "Doc_ID": (t.get("doc") or "") if t["answer"] else "",
             "Page_Num": (t.get("page") or "") if t["answer"] else ""} for t in traces]
    write_outputs(out, rows, traces, result, ["Question_ID", "Answer", "Doc_ID", "Page_Num"])
