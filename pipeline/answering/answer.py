"""Stage 6 — answering and localisation: six probabilities from the evidence, then the page.

The answer model (``Answerer``, ``pipeline.backends.base``) scores the six
options given the top ``top_k_answer`` reranked chunks (each optionally followed
by its next chunk, ``neighbours``), in ``answer_orders`` cyclic orders of the
options averaged (1: as given). With ``read_first`` the top passages are read
first, and the rest only when that answer's probability is below
``read_first_enough``. Below ``retry_below`` it is asked again with
wider evidence (``retry_top_k``) and the surer answer is kept. The document is
the top reranked chunk's; the page is the one of its pages that holds most of
the question's and answer's words.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..backends.base import Answerer, Scores
from ..errors import BackendUnavailable
from ..settings import Settings
from ..text import normalize
from ..types import LETTERS, Answer, Candidate, CandidateScores, Chunk, Question, Search, chunk_id


def evidence_page(c: Candidate, q: Question, letter: str | None) -> int:
    """The page of a chunk that holds the evidence: where the question's and answer's words are."""
    return page_with_words(c, q.text + " " + (q.options[LETTERS.index(letter)] if letter else ""))


def page_with_words(c: Candidate, text: str) -> int:
    """The page of a (possibly multi-page) chunk whose part shares most normalised words with ``text``."""
    if len(c.chunk.spans) == 1:
        return c.chunk.spans[0][0]
    want = set(normalize(text))
    body, pos, best, best_n = c.chunk.body, 0, c.chunk.spans[0][0], -1
    for page, s, e in c.chunk.spans:
        part = body[pos: pos + (e - s)]
        pos += (e - s) + 1
        n = len(want & set(normalize(part)))
        if n > best_n:
            best, best_n = page, n
    return best


def select_evidence(reranked: list[Candidate], k: int, neighbours: bool,
                    chunks: Callable[[list[str]], list[Chunk]], distinct_pages: bool = False) -> list[Candidate]:
    """The top ``k`` candidates, each followed by its next chunk in the document when ``neighbours``.

    ``distinct_pages``: a candidate whose pages all lie on pages already taken is passed over for the next one,
    so that two short chunks of one page do not fill both places (the page is read once; the other place goes
    to the best passage of another page). The top candidate is always first."""
    top = _distinct(reranked, k) if distinct_pages else reranked[:k]
    if not neighbours:
        return top
    out: list[Candidate] = []
    for c in top:
        out.append(c)
        nxt = chunks([chunk_id(c.chunk.doc_hash, c.chunk.index + 1)])
        if nxt and all(x.chunk.chunk_id != nxt[0].chunk_id for x in top):
            out.append(Candidate(nxt[0], CandidateScores(neighbour_of=c.rank), c.rank))
    return out


def _distinct(reranked: list[Candidate], k: int) -> list[Candidate]:
    taken: list[Candidate] = []
    seen: set[tuple[str, int]] = set()
    for c in reranked:
        pages = {(c.chunk.doc_name, p) for p in c.chunk.pages}
        if taken and pages <= seen:
            continue
        taken.append(c)
        seen |= pages
        if len(taken) == k:
            return taken
    return taken + [c for c in reranked if c not in taken][: k - len(taken)]  # fewer pages than places


def score_options(answerer: Answerer, q: Question, chosen: list[Candidate], s: Settings) -> Scores:
    """This pipeline's scorer: :func:`score_once`, or with ``answer_orders`` > 1 its log-probabilities
    averaged over that many cyclic orders of the options (:func:`option_orders`), each under the options'
    own letters; the scorer's own probabilities (``letter``, ``option``) are the first order's."""
    orders = option_orders(q, s.answer.answer_orders)
    if len(orders) <= 1:
        return score_once(answerer, q, chosen, s)
    runs = []
    for order in orders:
        sc = score_once(answerer, Question(q.qid, q.text, [q.options[i] for i in order]), chosen, s)
        runs.append((order, sc))
    logp = np.zeros(len(LETTERS))
    for order, sc in runs:
        for j, i in enumerate(order):
            logp[i] += np.log(max(sc.probabilities.get(LETTERS[j], 0.0), 1e-300)) / len(runs)
    logp[[i for i, o in enumerate(q.options) if not o.strip()]] = -np.inf
    p = np.exp(logp - logp.max())
    first = runs[0][1]
    return Scores({L: float(x) for L, x in zip(LETTERS, p / p.sum())}, first.letter, first.option,
                  first.prompt_tokens, sum(sc.seconds for _, sc in runs), first.features)


def given_only(sc: Scores, q: Question) -> Scores:
    """``sc`` with the probability of each empty option (a question with fewer than six) set to 0 and the given
    ones renormalised: a scorer that reads the six letters (``letter``) would otherwise leave some on a blank one."""
    empty = [L for L, o in zip(LETTERS, q.options) if not o.strip()]
    total = sum(p for L, p in sc.probabilities.items() if L not in empty)
    if empty and total > 0:
        sc.probabilities = {L: (0.0 if L in empty else p / total) for L, p in sc.probabilities.items()}
    return sc


def score_once(answerer: Answerer, q: Question, chosen: list[Candidate], s: Settings) -> Scores:
    """The options scored once, in their given order (empty options get 0: :func:`given_only`)."""
    return given_only(_score_once(answerer, q, chosen, s), q)


def _score_once(answerer: Answerer, q: Question, chosen: list[Candidate], s: Settings) -> Scores:
    """``calibrated`` combines per-option features (pipeline.answering.calibration)."""
    if s.answer.scorer == "listed" and s.answer.listed_support_weight:
        from .calibration import with_support

        return with_support(answerer.score(q, chosen, scorer=s.answer.scorer), q, chosen, s.answer.listed_support_weight,
                            s.answer.listed_temperature)
    if s.answer.scorer != "calibrated":
        return answerer.score(q, chosen, scorer=s.answer.scorer)
    if not getattr(answerer, "per_option_features", False):
        raise BackendUnavailable(f"the calibrated scorer needs the llama.cpp answerer, not {type(answerer).__name__}")
    from .calibration import calibrated_scores

    return calibrated_scores(answerer, q, chosen)


def option_orders(q: Question, n: int) -> list[list[int]]:
    """Up to ``n`` orders of ``q``'s options, the given one first, then cyclic shifts of the non-empty options
    (each option visits other positions); ``order[j]`` is the original index shown at position ``j``."""
    present = [i for i, o in enumerate(q.options) if o.strip()]
    blank = [i for i in range(len(q.options)) if i not in present]
    return [present[k:] + present[:k] + blank for k in range(min(max(1, n), max(1, len(present))))]


def order_check(answerer: Answerer, q: Question, chosen: list[Candidate], s: Settings, n: int) -> dict:
    """Does the answer hold when the options are shown in other orders (same evidence, so an answer
    model with a prompt cache recomputes only the options)? Each order's probabilities are given under
    the options' original letters; ``stable`` is whether every order picked the same option."""
    rows = []
    for order in option_orders(q, n):
        shown = Question(q.qid, q.text, [q.options[i] for i in order])
        sc = score_options(answerer, shown, chosen, s)
        back = {LETTERS[i]: sc.probabilities.get(LETTERS[j], 0.0) for j, i in enumerate(order)}
        rows.append({"order": "".join(LETTERS[i] for i in order), "answer": max(back, key=back.get),
                     "probabilities": back, "seconds": sc.seconds})
    return {"orders": rows, "stable": len({r["answer"] for r in rows}) == 1}


def powered(probs: dict[str, float], a: float) -> dict[str, float]:
    """``probs`` raised to the power ``a`` and renormalised (a < 1: less sure; the order of the options kept)."""
    raised = {L: p ** a if p > 0 else 0.0 for L, p in probs.items()}
    total = sum(raised.values())
    return {L: v / total for L, v in raised.items()} if total > 0 else probs


def lapsed(probs: dict[str, float], e: float, given: list[str]) -> dict[str, float]:
    """``probs`` with a share ``e`` spread evenly over the ``given`` options (a lapse: an answerer that is wrong a
    share of the time whatever it says); the others keep 0, the order of the options is kept."""
    if not e or not given:
        return probs
    return {L: (1 - e) * p + (e / len(given) if L in given else 0.0) for L, p in probs.items()}


def calibrated(probs: dict[str, float], q: Question, answerer: Answerer, s: Settings, rule: str,
               details: dict) -> dict[str, float]:
    """The probabilities as shown, by the answer path's entry in ``calibration_by_path`` (else its "*" entry):
    :func:`powered` by its power for ``rule`` ("stood": the top passage was enough, "read": all were read), then
    :func:`lapsed` by its "lapse" over the question's given options. The letter is unchanged; what was applied goes
    into ``details["calibration"]``."""
    path = getattr(answerer, "answer_path", "")
    by_path = s.answer.calibration_by_path
    entry = by_path.get(path, by_path.get("*")) or {}
    a, e = float(entry.get(rule, 1.0)), float(entry.get("lapse", 0.0))
    if (a == 1.0 and not e) or not probs:
        return probs
    details["calibration"] = {"path": path, "rule": rule, "power": a, "lapse": e}
    return lapsed(powered(probs, a), e, [L for L, o in zip(LETTERS, q.options) if o.strip()])


def answer_options(q: Question, found: Search, chosen: list[Candidate], wider: list[Candidate] | None,
                   answerer: Answerer, settings: Settings) -> Answer:
    """The answer to a six-option question from what search ``found``: the options scored over the passages
    ``chosen`` (the evidence), and, when the answer is unsure (below ``retry_below``), again over ``wider``
    (the surer of the two kept). The document is the top candidate's; the page its evidence page."""
    s, k = settings, settings.answer.read_first
    first = score_options(answerer, q, chosen[:k], s) if 0 < k < len(chosen) else None
    sure = max(first.probabilities.values()) if first is not None else 0.0
    if first is not None and sure >= s.answer.read_first_enough:
        scores, chosen, spent = first, chosen[:k], first.seconds  # the top passages were enough
    else:
        scores = score_options(answerer, q, chosen, s)  # reads on from the top passages' cache
        spent = scores.seconds + (first.seconds if first is not None else 0.0)
    timings = {**found.timings, "answer": spent}
    details = {"letter": scores.letter, "option": scores.option, "prompt_tokens": scores.prompt_tokens,
               "retrieved": list(found.retrieved), "retried": False}
    if first is not None:
        details["read_first"] = {"passages": k, "probability": sure,
                                 "prompt_tokens": first.prompt_tokens, "enough": scores is first}
    if scores.features:
        details["features"] = scores.features
    probs = scores.probabilities
    if wider and s.answer.retry_below and max(probs.values()) < s.answer.retry_below:
        again = score_options(answerer, q, wider, s)
        timings["answer_retry"] = again.seconds
        details["retried"] = True
        if max(again.probabilities.values()) > max(probs.values()):
            probs, chosen = again.probabilities, wider
    letter = max(probs, key=probs.get)
    probs = calibrated(probs, q, answerer, s, "stood" if first is not None and scores is first else "read", details)
    top = found.reranked[0]
    return Answer(letter, probs, top.chunk.doc_name, top.chunk.doc_hash, evidence_page(top, q, letter),
                  list(found.reranked), chosen, timings, details)
