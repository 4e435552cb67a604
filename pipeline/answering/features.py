"""Per-option evidence features for the answer combiner (``pipeline.answering.calibration``).

Everything the LLM computes goes through the answerer's free-text interface
(``backends.base.Answerer``) and, on llama.cpp, reuses one cached prompt
prefix. Groups (each costs only its own tail once the shared passages +
question are in the cache):

* ``neutral`` — each option's log-likelihood after the question *without*
  passages (evaluated first: it is short, and its system prompt is the shared
  prompt's first tokens, so the passage prompt reuses it);
* ``option`` — each option's log-likelihood after passages + question (the
  ``option`` scorer's numbers), mean and sum over its tokens;
* ``letter`` — the probabilities of " A" … " F" after the lettered options,
  for cyclic shifts of the option order (a shift ``s`` shows option ``i`` at
  position ``(i + s) % 6``), mapped back to the options;
* ``verify`` — for each option stated as the answer, log p(Так) − log p(Ні)
  ("do the passages support this answer?");
* ``support`` — lexical support of each option in the evidence (no LLM):
  the share of the option's words found in the passages, and BM25 of the
  option's words against the evidence chunks.

Nothing here is keyed to a domain: the prompts are generic.
"""
from __future__ import annotations

import time

import numpy as np

from ..prompts import OPTION_TAIL, fit_lines, fit_shared_prompt, letter_texts, neutral_prompt, passage_text
from ..text import normalize, words
from ..types import LETTERS, Candidate, Question

GROUPS = ("neutral", "option", "letter", "verify", "support")
NEG = -1e9

VERIFY_TAIL = ("\n\nЧи підтверджують фрагменти, що правильна відповідь на запитання саме така? "
               "Відповідай лише «Так» або «Ні».\nВідповідь: {option}<|im_end|>\n<|im_start|>assistant\n")
VERIFY_YES, VERIFY_NO = ("Так", "так", " Так"), ("Ні", "ні", " Ні")


def shifted_tail(q: Question, shift: int) -> tuple[str, list[int]]:
    """The lettered-options tail with option ``i`` shown at ``(i + shift) % 6``; ``order[pos]`` = option index."""
    order = [(pos - shift) % 6 for pos in range(6)]
    opts = "\n".join(f"{LETTERS[pos]}. {q.options[i].strip()}" for pos, i in enumerate(order))
    return (f"\n\nВаріанти відповіді:\n{opts}\n\nОбери один правильний варіант і відповідай лише його літерою."
            f"<|im_end|>\n<|im_start|>assistant\nВідповідь:"), order


def _option_lps(ans, prompt, q: Question) -> list[list[float]]:
    """Each option's token log-probabilities after ``prompt`` (the first 64 tokens; [] for an empty option)."""
    got = iter(ans.continuation_logprobs(prompt, [" " + o.strip() for o in q.options if o.strip()], max_tokens=64))
    return [next(got) if o.strip() else [] for o in q.options]


def llm_features(ans, q: Question, evidence: list[Candidate], groups=GROUPS, shifts=(0, 3)) -> tuple[dict, dict]:
    """Raw per-option LLM features and the seconds each group took, through ``ans``'s free-text interface
    (``backends.base.Answerer``; one cache on llama.cpp: call inside ``ans.exclusive()``).

    Lists are per option (A–F); an empty option gets ``None``/NEG.
    """
    s = ans.settings
    f: dict = {}
    secs: dict = {}
    terms = set(normalize(" ".join([q.text, *q.options]), "prefix6"))
    if "neutral" in groups:
        t = time.perf_counter()
        lps = _option_lps(ans, neutral_prompt(q), q)
        f["neutral_sum"] = [float(np.sum(x)) if x else None for x in lps]
        secs["neutral"] = time.perf_counter() - t
    if not set(groups) - {"neutral", "support"}:
        return f, secs
    t = time.perf_counter()
    passages = [fit_lines(passage_text(c), s.answer.passage_tokens, terms, ans.count_tokens) for c in evidence]
    shared = fit_shared_prompt(q, passages, ans.count_tokens, s.answer.n_ctx)
    f["prompt_tokens"] = ans.count_tokens(shared)
    ans.prefill([shared, OPTION_TAIL])  # the prefix alone, timed apart from the option tails
    secs["prefix"] = time.perf_counter() - t
    if "option" in groups:
        t = time.perf_counter()
        lps = _option_lps(ans, [shared, OPTION_TAIL], q)
        f["option_mean"] = [float(np.mean(x)) if x else None for x in lps]
        f["option_sum"] = [float(np.sum(x)) if x else None for x in lps]
        f["option_ntok"] = [len(x) for x in lps]
        secs["option"] = time.perf_counter() - t
    if "verify" in groups:
        t = time.perf_counter()
        f["verify"] = [ans.yes_log_odds([shared, VERIFY_TAIL.format(option=o.strip())], VERIFY_YES, VERIFY_NO)
                       if o.strip() else None for o in q.options]
        secs["verify"] = time.perf_counter() - t
    if "letter" in groups:
        t = time.perf_counter()
        by_shift = {}
        for sh in shifts:
            tail, order = shifted_tail(q, sh)
            lp = np.array([x[0] for x in ans.continuation_logprobs([shared, tail], letter_texts())])
            lp = lp - np.logaddexp.reduce(lp)  # log-probs over the six letters, by position
            by_shift[str(sh)] = [float(x) for x in lp]  # position -> log p
        f["letter_pos"] = by_shift
        secs["letter"] = time.perf_counter() - t
    return f, secs


def _stems(text: str) -> set[str]:
    """Words cut to 4 characters (5 for long words): inflected forms of one word share a stem."""
    return {w[:5] if len(w) > 8 else w[:4] for w in words(text)}


def support_features(library, q: Question, evidence: list[Candidate], norm: str = "prefix6") -> dict:
    """Lexical support of each option in the evidence passages (no LLM; BM25 only with a ``library``)."""
    text = " ".join(f"{c.chunk.heading} {c.chunk.body}" for c in evidence)
    have = _stems(text)
    ids = [c.chunk.chunk_id for c in evidence]
    cov, bm = [], []
    for o in q.options:
        st = _stems(o)
        ws = set(normalize(o, norm))
        cov.append(len(st & have) / len(st) if st else 0.0)
        if ws and library is not None:
            sc = library.lexical_scores(o)
            bm.append(max(sc.get(i, 0.0) for i in ids))
        else:
            bm.append(0.0)
    return {"support_cov": cov, "support_bm25": bm}


def letter_debiased(letter_pos: dict, prior: np.ndarray | None = None) -> np.ndarray:
    """Per-option mean log-probability over the shifts (minus the position prior, if given)."""
    out = np.zeros(6)
    for sh, lp in letter_pos.items():
        lp = np.asarray(lp) - (prior if prior is not None else 0.0)
        for i in range(6):
            out[i] += lp[(i + int(sh)) % 6]
    return out / max(1, len(letter_pos))
