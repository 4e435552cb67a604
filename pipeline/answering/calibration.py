"""The answer combiner and its calibration.

* ``option_matrix`` turns an answer's raw per-option features
  (``pipeline.answering.features``) into a small matrix, one row per option;
* a conditional (multinomial) logit with one weight vector shared by the six
  options scores the rows; a temperature on top calibrates the probabilities.

The "may not be in your documents" signal, fitted in the same file, is ``pipeline.answering.flag``.

The fitted weights are a small JSON file (``pipeline/answering/weights.json``),
written by ``python -m fit`` from what a benchmark fitted (``bench/results/fitted/``; the answer combiner's by the
finished study ``bench.answer_quality``, read with ``git show a97bb4a:bench/answer_quality_fit.py``).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..backends.base import Scores
from ..errors import BackendUnavailable
from ..types import LETTERS, Candidate, Question

WEIGHTS = Path(__file__).with_name("weights.json")
NEG = -1e9


# ---- per-option features ------------------------------------------------------------------------
def _arr(xs, fill=0.0) -> np.ndarray:
    return np.array([fill if x is None else x for x in xs], dtype=np.float64)


def option_features(rec: dict, prior: list[float] | None = None) -> dict[str, np.ndarray]:
    """Every per-option feature that the raw record allows (six values each)."""
    from .features import letter_debiased

    out: dict[str, np.ndarray] = {}
    if rec.get("option_mean"):
        out["option"] = _arr(rec["option_mean"])
        out["option_sum"] = _arr(rec["option_sum"])
        if rec.get("neutral_sum"):
            pmi = _arr(rec["option_sum"]) - _arr(rec["neutral_sum"])
            out["pmi_sum"] = pmi
            out["pmi"] = pmi / np.maximum(1, _arr(rec["option_ntok"], 1))
    if rec.get("letter_pos"):
        pr = np.asarray(prior) if prior is not None else None
        out["letter"] = letter_debiased(rec["letter_pos"], pr)
        if "0" in rec["letter_pos"]:
            out["letter0"] = np.asarray(rec["letter_pos"]["0"], dtype=np.float64)
    if rec.get("verify"):
        out["verify"] = _arr(rec["verify"])
    if rec.get("support_cov"):
        out["cov"] = _arr(rec["support_cov"])
        out["bm25"] = np.log1p(np.maximum(0.0, _arr(rec["support_bm25"])))
    return out


def option_mask(options: list[str]) -> np.ndarray:
    return np.array([bool(o and o.strip()) for o in options])


def matrix(rec: dict, names: list[str], prior=None) -> np.ndarray:
    f = option_features(rec, prior)
    return np.stack([f[n] for n in names], axis=1)  # (6, k)


# ---- the conditional logit ----------------------------------------------------------------------
def softmax_masked(z: np.ndarray, mask: np.ndarray) -> np.ndarray:
    z = np.where(mask, z, -np.inf)
    e = np.exp(z - z[mask].max())
    return e / e.sum()


def fit_clogit(X: np.ndarray, y: np.ndarray, M: np.ndarray, l2: float = 1.0, iters: int = 50) -> np.ndarray:
    """Weights shared by the options: X (n, 6, k) standardised features, y (n,) gold index, M (n, 6) masks.

    Maximises sum log softmax(X w)[y] - l2/2 |w|^2 by Newton's method.
    """
    n, _, k = X.shape
    w = np.zeros(k)
    for _ in range(iters):
        g = -l2 * w
        H = -l2 * np.eye(k)
        for Xi, yi, mi in zip(X, y, M):
            p = softmax_masked(Xi @ w, mi)
            xb = p @ Xi
            g += Xi[yi] - xb
            H -= (Xi * p[:, None]).T @ Xi - np.outer(xb, xb)
        step = np.linalg.solve(H, g)
        w = w - step
        if np.abs(step).max() < 1e-7:
            break
    return w


def fit_temperature(Z: np.ndarray, y: np.ndarray, M: np.ndarray) -> float:
    """The temperature T minimising the Brier score of softmax(Z / T) (grid, then refined).

    The Brier score, unlike the log-likelihood, is not dominated by a few confidently wrong answers, so
    the confidence shown comes out calibrated instead of timid: on ``../shared/unlp`` (option scorer,
    held-out folds) ECE 0.068 against 0.117 for the likelihood's temperature (bench/answer_quality.md).
    """
    def brier(t):
        return sum(float(((softmax_masked(z / t, m) - np.eye(len(z))[yi]) ** 2).sum()) for z, yi, m in zip(Z, y, M))
    grid = np.exp(np.linspace(np.log(0.02), np.log(50), 60))
    best = grid[int(np.argmin([brier(t) for t in grid]))]
    fine = best * np.exp(np.linspace(-0.12, 0.12, 13))
    return float(fine[int(np.argmin([brier(t) for t in fine]))])


# ---- the fitted model, as used by the answerer -------------------------------------------------
@lru_cache(maxsize=4)
def load_weights(path: str | None = None) -> dict:
    p = Path(path) if path else WEIGHTS
    if not p.exists():
        raise FileNotFoundError(f"no fitted answer weights at {p}: the checkout lacks pipeline/answering/weights.json")
    return json.loads(p.read_text())


def combine(rec: dict, options: list[str], model: dict) -> np.ndarray:
    """Calibrated probabilities of the six options from raw features and a fitted model (``load_weights()``)."""
    X = matrix(rec, model["features"], model.get("letter_prior"))
    z = ((X - np.asarray(model["mean"])) / np.asarray(model["scale"])) @ np.asarray(model["weights"])
    return softmax_masked(z / model["temperature"], option_mask(options))


# the LLM feature groups each combiner feature needs
GROUPS_FOR = {"option": {"option"}, "option_sum": {"option"}, "pmi": {"option", "neutral"},
              "pmi_sum": {"option", "neutral"}, "letter": {"letter"}, "letter0": {"letter"}, "verify": {"verify"},
              "cov": set(), "bm25": set()}


def calibrated_scores(ans, q: Question, evidence: list[Candidate], model: dict | None = None):
    """The ``calibrated`` scorer: only the features the fitted model needs, combined and calibrated.

    ``ans`` is an ``Answerer`` (the weights were fitted on the llama.cpp one's features); returns its ``Scores``
    with the raw features in ``features``.
    """
    import time

    from .features import llm_features, support_features

    t0 = time.perf_counter()
    model = model or load_weights()
    groups = set().union(*(GROUPS_FOR[n] for n in model["features"]))
    shifts = tuple(model.get("shifts") or (0,)) if "letter0" not in model["features"] else (0,)
    with ans.exclusive():
        rec, secs = llm_features(ans, q, evidence, tuple(groups), shifts)
    rec.update(support_features(None, q, evidence))
    p = combine(rec, q.options, model)
    probs = {L: float(x) for L, x in zip(LETTERS, p)}
    rec["seconds"] = secs
    option = {}
    if rec.get("option_mean"):  # the option scorer's own probabilities, as the other scorers report them
        z = np.array([x if x is not None else NEG for x in rec["option_mean"]])
        po = softmax_masked(z / max(1e-3, ans.settings.answer.option_temperature), option_mask(q.options))
        option = {L: float(x) for L, x in zip(LETTERS, po)}
    return Scores(probs, {}, option, rec.get("prompt_tokens", 0), time.perf_counter() - t0, features=rec)


def with_support(sc: Scores, q: Question, chosen: list[Candidate], weight: float, temperature: float) -> Scores:
    """``sc`` with each option's value (``features["listed_value"]``, the listed scorer's, before its
    temperature) raised by ``weight`` × the share of its word stems found in the passages (``support_cov`` of
    :func:`pipeline.answering.features.support_features`), then a softmax at ``temperature``; the coverage goes
    to the trace."""
    from .features import support_features

    if "listed_value" not in sc.features:
        raise BackendUnavailable("listed_support_weight needs the listed scorer's values (the llama.cpp answerer)")
    cov = support_features(None, q, chosen)["support_cov"]
    v = (np.array(sc.features["listed_value"]) + weight * np.array(cov)) / max(1e-3, temperature)
    probs = {L: float(x) for L, x in zip(LETTERS, softmax_masked(v, option_mask(q.options)))}
    return Scores(probs, sc.letter, probs, sc.prompt_tokens, sc.seconds, {**sc.features, "listed_support": cov})
