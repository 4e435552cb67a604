"""Evaluation runs in the web app: naming, saving, loading, and the per-question table.

Error kinds and the comparison of two runs are the evaluation's
(``pipeline.evaluation.metric``).

A run is a folder ``<runs_dir>/<name>/`` holding what ``pipeline.evaluate``
writes (``submission.csv``, ``metrics.json``, ``trace.jsonl``) plus
``questions.json`` (the questions' text and options, for display).
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import asdict
from pathlib import Path

from pipeline.evaluation.metric import error_kinds

from .views import short_name

_NAME = re.compile(r"[^\w.\-]+", re.UNICODE)


def clean_run_name(name: str | None, now: float | None = None) -> str:
    """A safe folder name for a run (letters, digits, ``.-_``); a timestamp when empty."""
    s = _NAME.sub("-", (name or "").strip()).strip(".-_")[:64]
    return s or time.strftime("run-%Y%m%d-%H%M%S", time.localtime(now))


def unique_run_name(runs_dir: Path, name: str) -> str:
    """``name``, or ``name-2``, ``name-3``… if a run of that name exists."""
    if not (runs_dir / name).exists():
        return name
    i = 2
    while (runs_dir / f"{name}-{i}").exists():
        i += 1
    return f"{name}-{i}"


def list_runs(runs_dir: Path) -> list[str]:
    """Saved runs, newest first."""
    if not runs_dir.exists():
        return []
    runs = [d for d in runs_dir.iterdir() if d.is_dir() and (d / "trace.jsonl").exists()]
    runs.sort(key=lambda d: (d / "trace.jsonl").stat().st_mtime, reverse=True)
    return [d.name for d in runs]


def run_dir(runs_dir: Path, name: str) -> Path:
    """The folder of a saved run; raises ``ValueError`` for a name that is not a plain folder name."""
    if not name or name != clean_run_name(name) or name in (".", ".."):
        raise ValueError(f"not a run name: {name!r}")
    return runs_dir / name


def save_questions(out: Path, questions) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "questions.json").write_text(json.dumps([asdict(q) for q in questions], ensure_ascii=False))


def load_run(runs_dir: Path, name: str) -> dict:
    """``{"name", "metrics", "traces", "questions"}`` of a saved run."""
    d = run_dir(runs_dir, name)
    traces = [json.loads(line) for line in (d / "trace.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    metrics = json.loads((d / "metrics.json").read_text()) if (d / "metrics.json").exists() else {}
    qfile = d / "questions.json"
    questions = {q["qid"]: q for q in json.loads(qfile.read_text())} if qfile.exists() else {}
    return {"name": name, "metrics": metrics, "traces": traces, "questions": questions, "dir": d}


def not_asked(t: dict) -> bool:
    """Whether a run never asked this question: it was stopped first (the Evaluate tab's Stop records
    "Stopped: …"), or the questions before it timed out on a model server (``not_tried``)."""
    return bool(t.get("not_tried")) or str(t.get("error", "")).startswith("Stopped:")


def _errors_cell(t: dict, gold: dict) -> str:
    if not_asked(t) and not t.get("not_tried"):
        return "not asked (stopped)"
    if t.get("error"):
        return f"failed: {t['error']}"
    return "; ".join(error_kinds(t)) or ("right" if gold else "no gold")


def _order_cell(t: dict) -> str:
    """The option-order check: "holds" or the answers it gave (empty when the run did not check)."""
    check = t.get("order_check")
    if not check:
        return ""
    answers = [r["answer"] for r in check["orders"]]
    return f"holds ({len(answers)})" if check["stable"] else "changes: " + "/".join(dict.fromkeys(answers))


def _cut(text: str, n: int) -> str:
    return text[:n] + ("…" if len(text) > n else "")


def question_rows(traces: list[dict], questions: dict[str, dict] | None = None) -> list[list]:
    """One row per question for the per-question table (plain values, no markup)."""
    questions = questions or {}
    rows = []
    for t in traces:
        gold = t.get("gold") or {}
        q = questions.get(t["Question_ID"], {})
        text = q.get("text", "")
        free = "abstained" in t  # a free-form run: answers are text, "not found" when abstained
        answer, gold_answer = t.get("answer") or "", gold.get("answer") or ""
        if free:
            answer = _cut(answer, 80) or ("" if "error" in t else "(not found)")
            gold_answer = _cut(gold_answer, 80) or ("(unanswerable)" if gold else "")
        rows.append([t["Question_ID"], _cut(text, 160), answer, gold_answer, short_name(t.get("doc")),
                     short_name(gold.get("doc")),
                     t.get("page") if t.get("page") is not None else "",
                     gold.get("page") if gold.get("page") is not None else "",
                     _errors_cell(t, gold), _order_cell(t), round(float(t.get("seconds", 0.0)), 2)])
    return rows
