"""Evaluation runs: naming, saving, loading, error kinds, filtering and comparing two runs.

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

ALL = "all"
WRONG_ANSWER = "wrong answer"
WRONG_DOC = "wrong document"
WRONG_PAGE = "wrong page"
FAILED = "failed"
KINDS = [ALL, WRONG_ANSWER, WRONG_DOC, WRONG_PAGE, FAILED]
METRICS = ["score", "answer_accuracy", "doc_accuracy", "page_proximity"]

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


# ---- error kinds ---------------------------------------------------------
def error_kinds(rec: dict) -> list[str]:
    """What went wrong for one trace record: failed / wrong answer / wrong document / wrong page.

    A wrong page is counted only when the document is right. Without gold
    columns nothing can be wrong (an empty list), unless the question failed.
    """
    kinds = []
    if rec.get("error"):
        kinds.append(FAILED)
    gold = rec.get("gold")
    if not gold:
        return kinds
    if gold.get("answer") and rec.get("answer") != gold["answer"]:
        kinds.append(WRONG_ANSWER)
    if gold.get("doc") and rec.get("doc") != gold["doc"]:
        kinds.append(WRONG_DOC)
    elif gold.get("doc") and gold.get("page") is not None and rec.get("page") != gold["page"]:
        kinds.append(WRONG_PAGE)
    return kinds


def filter_traces(traces: list[dict], kind: str) -> list[dict]:
    if not kind or kind == ALL:
        return list(traces)
    if kind not in KINDS:
        raise ValueError(f"unknown kind of error: {kind!r}")
    return [t for t in traces if kind in error_kinds(t)]


def kind_counts(traces: list[dict]) -> dict[str, int]:
    counts = {k: 0 for k in KINDS}
    counts[ALL] = len(traces)
    for t in traces:
        for k in error_kinds(t):
            counts[k] += 1
    return counts


QUESTION_COLUMNS = ["Question_ID", "Question", "Answer", "Gold answer", "Document", "Gold document", "Page",
                    "Gold page", "Errors", "Seconds"]


def _errors_cell(t: dict, gold: dict) -> str:
    if t.get("error"):
        return f"failed: {t['error']}"
    return "; ".join(error_kinds(t)) or ("right" if gold else "no gold")


def question_rows(traces: list[dict], questions: dict[str, dict] | None = None) -> list[list]:
    """One row per question for the per-question table (plain values, no markup)."""
    questions = questions or {}
    rows = []
    for t in traces:
        gold = t.get("gold") or {}
        q = questions.get(t["Question_ID"], {})
        text = q.get("text", "")
        rows.append([t["Question_ID"], text[:160] + ("…" if len(text) > 160 else ""), t.get("answer") or "",
                     gold.get("answer") or "", t.get("doc") or "", gold.get("doc") or "",
                     t.get("page") if t.get("page") is not None else "",
                     gold.get("page") if gold.get("page") is not None else "",
                     _errors_cell(t, gold), round(float(t.get("seconds", 0.0)), 2)])
    return rows


# ---- comparing two runs --------------------------------------------------
def _right(rec: dict) -> bool | None:
    gold = rec.get("gold") or {}
    if not gold.get("answer"):
        return None
    return rec.get("answer") == gold["answer"]


def compare_runs(a: dict, b: dict) -> dict:
    """Score deltas (B − A) and the questions whose answer flipped either way.

    ``a`` and ``b`` are :func:`load_run` results. ``flips`` lists questions in
    both runs whose answer became right (``fixed``) or wrong (``broken``); with
    no gold, questions whose letter changed (``changed``).
    """
    deltas = []
    for m in METRICS:
        va, vb = a["metrics"].get(m), b["metrics"].get(m)
        deltas.append({"metric": m, "A": va, "B": vb,
                       "B − A": (vb - va) if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else None})
    bt = {t["Question_ID"]: t for t in b["traces"]}
    flips = []
    for ta in a["traces"]:
        tb = bt.get(ta["Question_ID"])
        if tb is None:
            continue
        ra, rb = _right(ta), _right(tb)
        if ra is None or rb is None:
            change = "changed" if ta.get("answer") != tb.get("answer") else None
        elif ra != rb:
            change = "fixed" if rb else "broken"
        else:
            change = None
        if change:
            flips.append({"Question_ID": ta["Question_ID"], "change": change,
                          "gold": (ta.get("gold") or {}).get("answer") or "",
                          "A answer": ta.get("answer") or "", "B answer": tb.get("answer") or "",
                          "A document": ta.get("doc") or "", "B document": tb.get("doc") or ""})
    only_a = [t["Question_ID"] for t in a["traces"] if t["Question_ID"] not in bt]
    return {"deltas": deltas, "flips": flips, "fixed": sum(f["change"] == "fixed" for f in flips),
            "broken": sum(f["change"] == "broken" for f in flips), "only_in_a": only_a}
