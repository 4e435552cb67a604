"""The competition's metric, the kinds of error a question can have, and the comparison of two runs.

score = 0.5 · answer accuracy + 0.25 · document accuracy + 0.25 · page proximity
(1 − |page − gold page| / pages in the document, 0 when the document is wrong).

A six-option question whose answer is in none of the documents (gold answer ``questions.NONE``, no document, no
page) is answered right when the run says "not found" (the not-in-documents flag) — and then its document and
page are right too, naming none being right; any letter given is wrong in all three.
"""
from __future__ import annotations

from ..types import Candidate, Question
from .questions import NONE

ALL = "all"
WRONG_ANSWER = "wrong answer"
WRONG_DOC = "wrong document"
WRONG_PAGE = "wrong page"
FAILED = "failed"
UNSTABLE = "answer changes with option order"  # only for runs with the order check (settings.answer.order_check)
KINDS = [ALL, WRONG_ANSWER, WRONG_DOC, WRONG_PAGE, FAILED, UNSTABLE]
METRICS = ["score", "answer_accuracy", "doc_accuracy", "page_proximity", "ece"]
# free-form runs (questions without options; pipeline.evaluation.free): a wrong answer is token F1 < 0.5
ABSTAINED = "not found, but the answer was there"
ANSWERED_UNANSWERABLE = "answered an unanswerable question"
FREE_KINDS = [ALL, WRONG_ANSWER, ABSTAINED, ANSWERED_UNANSWERABLE, WRONG_DOC, WRONG_PAGE, FAILED]
FREE_METRICS = ["f1", "exact_match", "abstained_answerable", "abstention_recall", "abstention_precision",
                "doc_accuracy", "page_accuracy"]
FREE_RIGHT_F1 = 0.5


def is_free_run(traces: list[dict]) -> bool:
    """Whether trace records come from a free-form run (they say whether each question was abstained on)."""
    return any("abstained" in t for t in traces)


def kinds_for(traces: list[dict]) -> list[str]:
    return FREE_KINDS if is_free_run(traces) else KINDS


def page_proximity(pred_doc, pred_page, gold_doc, gold_page, n_pages) -> float:
    if pred_doc != gold_doc or pred_page is None or gold_page is None or not n_pages:
        return 0.0
    return max(0.0, 1.0 - abs(pred_page - gold_page) / n_pages)


def competition_score(answer_accuracy: float, doc_accuracy: float, page_proximity: float) -> float:
    """The competition's score from its three parts (each a mean over the questions): the one place it is written."""
    return 0.5 * answer_accuracy + 0.25 * doc_accuracy + 0.25 * page_proximity


def percentile(values, q: float) -> float:
    """The ``q``-quantile (0..1) of ``values`` by nearest rank: the sorted value at ``int(q * n)`` (p50 of an even
    count is the upper middle); ``nan`` for none. Every p50/p95 of the runs, the app and the benchmarks."""
    xs = sorted(values)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def metrics(rows: list[dict]) -> dict:
    """The competition's score and its parts over rows with pred_* and gold_* keys."""
    n = len(rows)
    if not n:
        return {}
    none = lambda r: r["gold_answer"] == NONE  # noqa: E731  (right: "not found", in all three parts)
    found = lambda r: float(bool(r.get("pred_not_found")))  # noqa: E731
    ans = sum(found(r) if none(r) else r["pred_answer"] == r["gold_answer"] for r in rows) / n
    doc = sum(found(r) if none(r) else r["pred_doc"] == r["gold_doc"] for r in rows) / n
    page = sum(found(r) if none(r) else
               page_proximity(r["pred_doc"], r["pred_page"], r["gold_doc"], r["gold_page"], r["gold_n_pages"])
               for r in rows) / n
    exact = sum(found(r) if none(r) else r["pred_doc"] == r["gold_doc"] and r["pred_page"] == r["gold_page"]
                for r in rows) / n
    return {"n": n, "score": competition_score(ans, doc, page), "answer_accuracy": ans,
            "doc_accuracy": doc, "page_proximity": page, "page@1": exact}


def calibration(predictions: list[tuple[dict, str, str]]) -> dict:
    """Whether the probabilities shown mean what they say, from (probabilities, answer, gold answer) of each
    question that was answered (``calibration_n`` of them): the chosen option's probability on average
    (``mean_confidence``) beside how often it was right (``answered_accuracy``: failed questions, counted wrong
    by the answer accuracy, have no probability to judge), the expected calibration error of that probability (10 equal-width bins,
    ``ece``), the ECE a perfectly calibrated answerer would show by chance at these confidences
    (``ece_chance``) and the share of such chance draws at least as large as ``ece`` (``ece_p``)."""
    from .scoring import ece, ece_by_chance

    rows = [(float(p[a]), a == g) for p, a, g in predictions if p and a in p and g]
    if not rows:
        return {}
    conf, right = [c for c, _ in rows], [float(r) for _, r in rows]
    chance, p_value = ece_by_chance(conf, right)
    return {"calibration_n": len(rows), "mean_confidence": sum(conf) / len(conf),
            "answered_accuracy": sum(right) / len(right), "ece": ece(conf, right), "ece_chance": chance,
            "ece_p": p_value}


def gold_rank(cands: list[Candidate], q: Question) -> int | None:
    for i, c in enumerate(cands, 1):
        if c.chunk.doc_name == q.gold_doc and q.gold_page in c.chunk.pages:
            return i
    return None


# ---- error kinds ---------------------------------------------------------
def error_kinds(rec: dict) -> list[str]:
    """What went wrong for one trace record: failed / wrong answer / wrong document / wrong page (and
    an answer that changed with the options' order, when the run checked it).

    A wrong page is counted only when the document is right. Without gold
    columns nothing can be wrong (an empty list), unless the question failed.
    """
    kinds = []
    if rec.get("error"):
        kinds.append(FAILED)
    if rec.get("order_check") and not rec["order_check"]["stable"]:
        kinds.append(UNSTABLE)
    gold = rec.get("gold")
    if not gold or (rec.get("error") and "abstained" in rec):
        return kinds
    if "abstained" in rec:  # free-form: abstentions are right only for unanswerable questions
        if not gold.get("answer"):
            return kinds + ([ANSWERED_UNANSWERABLE] if rec.get("answer") else [])
        if not rec.get("answer"):
            return kinds + [ABSTAINED]
        if not _free_right(rec):
            kinds.append(WRONG_ANSWER)
    elif gold.get("answer") == NONE:  # in no document: right only as "not found"
        if not rec.get("not_in_documents"):
            kinds.append(WRONG_ANSWER)
    elif gold.get("answer") and rec.get("answer") != gold["answer"]:
        kinds.append(WRONG_ANSWER)
    if gold.get("doc") and rec.get("doc") != gold["doc"]:
        kinds.append(WRONG_DOC)
    elif gold.get("doc") and gold.get("page") is not None and rec.get("page") != gold["page"]:
        kinds.append(WRONG_PAGE)
    return kinds


def _free_right(rec: dict) -> bool:
    from .scoring import token_f1

    return token_f1(rec.get("answer") or "", (rec.get("gold") or {}).get("answer") or "") >= FREE_RIGHT_F1


def filter_traces(traces: list[dict], kind: str) -> list[dict]:
    if not kind or kind == ALL:
        return list(traces)
    if kind not in KINDS + FREE_KINDS:
        raise ValueError(f"unknown kind of error: {kind!r}")
    return [t for t in traces if kind in error_kinds(t)]


def kind_counts(traces: list[dict]) -> dict[str, int]:
    counts = {k: 0 for k in kinds_for(traces)}
    counts[ALL] = len(traces)
    for t in traces:
        for k in error_kinds(t):
            counts[k] += 1
    return counts


# ---- comparing two runs --------------------------------------------------
def answer_right(rec: dict) -> bool | None:
    gold = rec.get("gold") or {}
    if "abstained" in rec and gold:  # free-form: right = F1 >= 0.5, or "not found" for an unanswerable one
        return _free_right(rec) if gold.get("answer") else not rec.get("answer")
    if not gold.get("answer"):
        return None
    if gold["answer"] == NONE:  # in no document: "not found" is the right answer
        return bool(rec.get("not_in_documents")) and not rec.get("error")
    return rec.get("answer") == gold["answer"]


def option_right(rec: dict) -> bool | None:
    """Whether the option a six-option run chose is right (None without a gold answer): what the probability
    shown for it is about. For a question in none of the documents no option is right, "not found" or not."""
    gold = (rec.get("gold") or {}).get("answer")
    return None if not gold else rec.get("answer") == gold


def _right(value, gold) -> bool | None:
    return None if gold in (None, "") else str(value or "") == str(gold)


def _flips(ta: dict, tb: dict) -> list[dict]:
    """What flipped for one question between two runs: its answer, document or page went from wrong to right
    (``fixed``) or back (``broken``); without gold, an answer that changed (``changed``)."""
    gold = ta.get("gold") or {}
    out = []
    for what, key in (("answer", "answer"), ("document", "doc"), ("page", "page")):
        if what == "answer":  # a letter, or a free-form answer (right: token F1 >= 0.5, or "not found")
            ra, rb = answer_right(ta), answer_right(tb)
        else:
            ra, rb = _right(ta.get(key), gold.get(key)), _right(tb.get(key), gold.get(key))
        if ra is None or rb is None:
            change = "changed" if what == "answer" and ta.get(key) != tb.get(key) else None
        else:
            change = None if ra == rb else "fixed" if rb else "broken"
        if change:
            out.append({"Question_ID": ta["Question_ID"], "what": what, "change": change,
                        "gold": gold.get(key) if gold.get(key) is not None else "",
                        "A": ta.get(key) if ta.get(key) is not None else "",
                        "B": tb.get(key) if tb.get(key) is not None else ""})
    return out


def compare_runs(a: dict, b: dict, not_asked=None) -> dict:
    """Score deltas (B − A) and the questions whose answer, document or page flipped either way.

    ``a`` and ``b`` are saved runs (``{"metrics", "traces"}``). ``flips`` lists, for questions in both
    runs, each of answer, document and page that became right (``fixed``) or wrong (``broken``); with no
    gold, answers that changed (``changed``). ``fixed`` and ``broken`` count the answers that did.
    A question either run did not ask (``not_asked(trace)``: e.g. a run stopped before it) is no flip: it is
    listed in ``not_asked`` (its score counts it wrong, but nothing broke). ``shared`` counts the questions both
    runs hold; a six-option run and a free-form one share none (their answers are of different kinds, whatever
    their Question_IDs), and ``kinds`` then names each run's kind ("six-option", "plain"), else is None.
    """
    free_a, free_b = is_free_run(a["traces"]), is_free_run(b["traces"])
    kind = lambda free: "plain" if free else "six-option"  # noqa: E731
    if free_a != free_b:  # nothing in common: no question, no metric
        return {"deltas": [], "flips": [], "fixed": 0, "broken": 0, "not_asked": [], "shared": 0,
                "only_in_a": [t["Question_ID"] for t in a["traces"]], "kinds": (kind(free_a), kind(free_b))}
    deltas = []
    for m in FREE_METRICS if free_a or free_b else METRICS:
        va, vb = a["metrics"].get(m), b["metrics"].get(m)
        deltas.append({"metric": m, "A": va, "B": vb,
                       "B − A": (vb - va) if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else None})
    skipped = not_asked or (lambda t: bool(t.get("not_tried")))
    bt = {t["Question_ID"]: t for t in b["traces"]}
    flips, unasked, shared = [], [], 0
    for ta in a["traces"]:
        tb = bt.get(ta["Question_ID"])
        if tb is None:
            continue
        shared += 1
        if skipped(ta) or skipped(tb):
            unasked.append(ta["Question_ID"])
            continue
        flips += _flips(ta, tb)
    answers = [f for f in flips if f["what"] == "answer"]
    only_a = [t["Question_ID"] for t in a["traces"] if t["Question_ID"] not in bt]
    return {"deltas": deltas, "flips": flips, "fixed": sum(f["change"] == "fixed" for f in answers),
            "broken": sum(f["change"] == "broken" for f in answers), "not_asked": unasked, "only_in_a": only_a,
            "shared": shared, "kinds": None}
