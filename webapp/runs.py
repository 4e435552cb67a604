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

from pipeline.evaluation.metric import answer_right, error_kinds, option_right
from pipeline.evaluation.questions import NONE

from .views import clip, doc_label, short_name

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


def _doc_cell(name: str | None, titles: dict[str, str]) -> str:
    """A document as the Library lists it (its title, then the file name cut short), fitted to a table cell."""
    return clip(doc_label(titles.get(name or "", ""), short_name(name)), 60) if name else ""


def question_rows(traces: list[dict], questions: dict[str, dict] | None = None,
                  titles: dict[str, str] | None = None) -> list[list]:
    """One row per question for the per-question table (plain values, no markup); documents by their titles
    (``titles``: file name → title) as in the Library."""
    questions, titles = questions or {}, titles or {}
    rows = []
    for t in traces:
        gold = gold_of(t, questions)  # a question not asked shows its gold too
        q = questions.get(t["Question_ID"], {})
        text = q.get("text", "")
        free = "abstained" in t  # a free-form run: answers are text, "not found" when abstained
        answer, gold_answer = t.get("answer") or "", gold.get("answer") or ""
        if free:
            answer = _cut(answer, 80) or ("" if "error" in t else "(not found)")
            gold_answer = _cut(gold_answer, 80) or ("(unanswerable)" if gold else "")
        else:
            if gold_answer == NONE:  # in no document: what decides is whether the run said "not found"
                gold_answer = "none (not in these documents)"
            # flagged: Ask says "Not found" for it, so the table does too, with the letter the run was scored on
            answer = f"not found ({answer})" if t.get("not_in_documents") and answer else answer
        rows.append([t["Question_ID"], _cut(text, 160), answer, gold_answer, _doc_cell(t.get("doc"), titles),
                     _doc_cell(gold.get("doc"), titles),
                     t.get("page") if t.get("page") is not None else "",
                     gold.get("page") if gold.get("page") is not None else "",
                     _errors_cell(t, gold), _order_cell(t), round(float(t.get("seconds", 0.0)), 2)])
    return rows


# ---- the pictures: reliability and where the gold page was lost ---------------------------------------------
BINS = 10


def reliability(traces: list[dict], bins: int = BINS) -> list[dict]:
    """The chosen option's probability against how often it was right, in ``bins`` equal-width bins, over the
    questions answered with a gold answer: per bin ``lo``, ``hi``, ``n``, ``right``, mean ``conf``, ``acc``
    (bins with no question are left out)."""
    got = [[] for _ in range(bins)]
    for t in traces:
        p, a = t.get("probabilities") or {}, t.get("answer")
        right = option_right(t)  # the probability shown is the chosen option's
        if a in p and right is not None and not t.get("error"):
            c = float(p[a])
            got[min(int(c * bins), bins - 1)].append((c, right))
    return [{"lo": i / bins, "hi": (i + 1) / bins, "n": len(b), "right": sum(r for _, r in b),
             "conf": sum(c for c, _ in b) / len(b), "acc": sum(r for _, r in b) / len(b)}
            for i, b in enumerate(got) if b]


def held_text(runs_dir: Path, p: float) -> str:
    """How far a shown probability ``p`` has held: in the visitor's newest run with gold answers, how often the
    answers shown in ``p``'s bin were right ("" when no run has gold answers)."""
    for name in list_runs(runs_dir):
        try:
            bins = reliability(load_run(runs_dir, name)["traces"])
        except (OSError, ValueError):
            continue
        if not bins:
            continue
        lo = min(int(p * BINS), BINS - 1) / BINS
        b = next((b for b in bins if abs(b["lo"] - lo) < 1e-9), None)
        span = f"{lo:.0%}–{lo + 1 / BINS:.0%}"
        if b is None:
            return f"How far that holds: your run “{name}” showed no answer at {span}, so it cannot say."
        return (f"How far that holds: in your run “{name}”, answers shown at {span} were right "
                f"{b['right']} of {b['n']} times.")
    return ("How far that holds: not measured in this library yet (run a questions CSV with answers in Evaluate "
            "to see it).")


NOT_RETRIEVED = "not retrieved"
BELOW_READ = "below the passages read"
PAGE_CHOICE = "moved out by page choice"
READ_WRONG = "read, answered wrong"
READ_RIGHT = "read, answered right"
NOT_ASKED = "failed or not asked"
STAGES = [NOT_RETRIEVED, BELOW_READ, PAGE_CHOICE, READ_WRONG, READ_RIGHT, NOT_ASKED]


def _on_gold(c: dict, gold: dict) -> bool:
    return c.get("doc") == gold["doc"] and gold["page"] in (c.get("pages") or [])


def gold_of(t: dict, questions: dict[str, dict] | None = None) -> dict:
    """A question's gold (answer, doc, page): its trace's, else its question's in the run's ``questions.json``
    (``questions``: :func:`load_run`'s). A question a stopped run never asked, or one that failed before its
    search, has no gold in its trace; it is counted with its gold all the same, as the score counts it."""
    if t.get("gold"):
        return t["gold"]
    q = (questions or {}).get(t.get("Question_ID"), {})
    return {"answer": q.get("gold_answer"), "doc": q.get("gold_doc"), "page": q.get("gold_page")} \
        if q.get("gold_doc") or q.get("gold_answer") == NONE else {}


def loss_stage(t: dict, questions: dict[str, dict] | None = None) -> str | None:
    """Where a question's gold page was lost: not among the retrieved passages; retrieved but ranked below the
    passages the model read (by the reranker's score); among them by that score but moved out by page choice
    (the re-ordering inside a long document); read, and the answer wrong — or read and answered right; failed or
    not asked. None for a question without a gold page (its gold from :func:`gold_of`)."""
    gold = gold_of(t, questions)
    if not gold.get("doc") or gold.get("page") is None:
        return None
    if t.get("error") or not_asked(t):
        return NOT_ASKED
    cands = t.get("candidates") or []
    if not (t.get("gold_rank") or {}).get("retrieval") and not any(_on_gold(c, gold) for c in cands):
        return NOT_RETRIEVED
    read = set(t.get("evidence") or [c["chunk_id"] for c in cands[:2]])
    if any(_on_gold(c, gold) and c["chunk_id"] in read for c in cands):
        return READ_WRONG if answer_right(t) is False else READ_RIGHT
    by_rerank = sorted(cands, key=lambda c: -(c.get("scores") or {}).get("rerank", float("-inf")))
    return PAGE_CHOICE if any(_on_gold(c, gold) for c in by_rerank[:len(read)]) else BELOW_READ


def loss_groups(traces: list[dict], titles: dict[str, str] | None = None, most: int = 8,
                questions: dict[str, dict] | None = None) -> list[dict]:
    """Per group — all questions, then each gold document (its title; the ``most`` with most questions) — the
    count of questions at each stage of :func:`loss_stage`: ``{"group", "doc", "n", "counts"}`` (``questions``:
    the run's, for the gold of the questions it did not ask)."""
    staged = [(t, s) for t in traces if (s := loss_stage(t, questions))]
    if not staged:
        return []
    docs: dict[str, list[str]] = {}
    for t, s in staged:
        docs.setdefault(gold_of(t, questions)["doc"], []).append(s)
    count = lambda ss: {k: ss.count(k) for k in STAGES}  # noqa: E731
    out = [{"group": "all questions", "doc": "", "n": len(staged), "counts": count([s for _, s in staged])}]
    for doc, ss in sorted(docs.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:most]:
        out.append({"group": doc_label((titles or {}).get(doc, ""), short_name(doc)), "doc": doc, "n": len(ss),
                    "counts": count(ss)})
    return out


def filter_lost(traces: list[dict], stage: str = "", doc: str = "",
                questions: dict[str, dict] | None = None) -> list[dict]:
    """The questions lost at ``stage`` (all stages when empty) whose gold document is ``doc`` (any when empty);
    ``questions``: the run's, as for :func:`loss_groups`."""
    return [t for t in traces if (not stage or loss_stage(t, questions) == stage)
            and (not doc or gold_of(t, questions).get("doc") == doc)]
