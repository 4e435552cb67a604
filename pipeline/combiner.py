"""The answer combiner, its calibration, and the "may not be in your documents" signal.

* ``option_matrix`` turns an answer's raw per-option features
  (``pipeline.answer_features``) into a small matrix, one row per option;
* a conditional (multinomial) logit with one weight vector shared by the six
  options scores the rows; a temperature on top calibrates the probabilities;
* ``flag_features`` + a logistic model say whether the question's document
  seems absent from the library (retrieval scores and question-word coverage
  of the evidence; no LLM).

The fitted weights are a small JSON file (``pipeline/answer_weights.json``),
refitted by ``python -m bench.answer_quality fit``.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from .text import normalize
from .types import Candidate, Question

WEIGHTS = Path(__file__).with_name("answer_weights.json")
NEG = -1e9


# ---- the not-in-documents signal --------------------------------------------------------------
# interrogatives (as lemmas): a question's own words that a document never needs to contain
QUESTION_WORDS = {"скільки", "який", "котрий", "чий", "чому", "навіщо", "нащо", "коли", "куди", "звідки", "хто",
                  "що", "як", "де", "чи", "наскільки", "якою", "яким"}


def _terms(text: str) -> set[str]:
    """Content terms as Ukrainian lemmas (so "година" in a question meets "години" in a page), without
    numbers and interrogatives."""
    return {w for w in normalize(text, "lemma") if len(w) >= 3 and not w.isdigit() and w not in QUESTION_WORDS}


_DF: dict = {}


def _doc_freq(library) -> tuple[dict[str, int], int]:
    """How many chunks hold each term (:func:`_terms`), cached per library state."""
    n = library.n_chunks()
    key = (str(library.root), n)
    if key not in _DF:
        df: dict[str, int] = {}
        for d in library.documents():
            for c in library.chunks_of(d.doc_hash):
                for t in _terms(f"{c.prefix} {c.heading} {c.body}"):
                    df[t] = df.get(t, 0) + 1
        if len(_DF) >= 8:  # the web app keeps at most 8 libraries open
            _DF.pop(next(iter(_DF)))
        _DF[key] = (df, n)
    return _DF[key]


def flag_features(library, q: Question, reranked: list[Candidate], evidence: list[Candidate]) -> dict:
    """Retrieval-only signals that the question's document is in the library (higher = more likely present)."""
    df, n = _doc_freq(library)
    qt = _terms(q.text)
    ev = set()
    for c in evidence:
        ev |= _terms(f"{c.chunk.prefix} {c.chunk.heading} {c.chunk.body}")
    idf = {t: np.log((n + 1) / (df.get(t, 0) + 0.5)) for t in qt}
    tot = sum(idf.values()) or 1.0
    rare = sorted(qt, key=lambda t: (df.get(t, 0), t))[:3]  # the question's rarest words here (ties: by spelling)
    opt_cov = []
    for o in q.options:
        ot = _terms(o)
        opt_cov.append(len(ot & ev) / len(ot) if ot else 0.0)
    dense = [c.scores.get("dense", 0.0) for c in reranked]
    return {
        "q_cov": len(qt & ev) / len(qt) if qt else 1.0,
        "q_cov_idf": float(sum(v for t, v in idf.items() if t in ev) / tot),
        "rare_cov": (sum(t in ev for t in rare) / len(rare)) if rare else 1.0,
        "rare_absent": (sum(df.get(t, 0) == 0 for t in rare) / len(rare)) if rare else 0.0,
        "opt_cov_max": max(opt_cov) if opt_cov else 0.0,
        "opt_cov_mean": float(np.mean(opt_cov)) if opt_cov else 0.0,
        "dense_top": float(max(dense)) if dense else 0.0,
        "dense_ev": float(reranked[0].scores.get("dense", 0.0)) if reranked else 0.0,
        "absent_words": sorted(t for t in qt if df.get(t, 0) == 0),  # for the reader, not a feature
    }


# ---- per-option features ------------------------------------------------------------------------
def _arr(xs, fill=0.0) -> np.ndarray:
    return np.array([fill if x is None else x for x in xs], dtype=np.float64)


def option_features(rec: dict, prior: list[float] | None = None) -> dict[str, np.ndarray]:
    """Every per-option feature that the raw record allows (six values each)."""
    from .answer_features import letter_debiased

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


def ece(conf: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error of the top-1 confidence, equal-width bins."""
    conf, correct = np.asarray(conf, dtype=float), np.asarray(correct, dtype=float)
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(conf, edges[1:-1]), 0, bins - 1)
    return float(sum(abs(conf[idx == b].mean() - correct[idx == b].mean()) * (idx == b).mean()
                     for b in range(bins) if (idx == b).any()))


def ece_by_chance(conf: np.ndarray, correct: np.ndarray, n_sim: int = 1000, seed: int = 0) -> tuple[float, float]:
    """What :func:`ece` a perfectly calibrated answerer would show by chance at these confidences on this many
    questions (each answer right with exactly its confidence; ``n_sim`` draws, fixed seed), and the share of
    those draws whose ECE is at least the observed one (a p-value: small means the probabilities are off).
    On 170 questions the chance ECE is about 0.06, so an ECE below that cannot show anything wrong."""
    conf, correct = np.asarray(conf, dtype=float), np.asarray(correct, dtype=float)
    rng = np.random.default_rng(seed)
    draws = np.array([ece(conf, (rng.random(len(conf)) < conf).astype(float)) for _ in range(n_sim)])
    return float(draws.mean()), float((draws >= ece(conf, correct) - 1e-12).mean())


# ---- the fitted model, as used by the answerer -------------------------------------------------
@lru_cache(maxsize=4)
def load_weights(path: str | None = None) -> dict:
    p = Path(path) if path else WEIGHTS
    if not p.exists():
        raise FileNotFoundError(f"no fitted answer weights at {p}: run python -m bench.answer_quality fit ...")
    return json.loads(p.read_text())


def combine(rec: dict, options: list[str], model: dict) -> np.ndarray:
    """Calibrated probabilities of the six options from raw features and a fitted model (``load_weights()``)."""
    X = matrix(rec, model["features"], model.get("letter_prior"))
    z = ((X - np.asarray(model["mean"])) / np.asarray(model["scale"])) @ np.asarray(model["weights"])
    return softmax_masked(z / model["temperature"], option_mask(options))


def flag_key(q: Question) -> str:
    """The flag model for a question: ``flag`` (six options, retrieved with them) or ``flag_free`` (no options)."""
    return "flag" if q.options else "flag_free"


def flag_score(feats: dict, model: dict, key: str = "flag") -> float:
    """Probability-like score that the question's document is NOT in the library (logistic model)."""
    fm = model[key]
    x = (np.array([feats[n] for n in fm["features"]]) - np.asarray(fm["mean"])) / np.asarray(fm["scale"])
    return float(1 / (1 + np.exp(-(x @ np.asarray(fm["weights"]) + fm["bias"]))))


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

    from .answer_features import llm_features, support_features
    from .backends.base import Scores
    from .types import LETTERS

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
        po = softmax_masked(z / max(1e-3, ans.settings.option_temperature), option_mask(q.options))
        option = {L: float(x) for L, x in zip(LETTERS, po)}
    return Scores(probs, {}, option, rec.get("prompt_tokens", 0), time.perf_counter() - t0, features=rec)


def not_in_documents(library, q: Question, reranked: list[Candidate], evidence: list[Candidate],
                     model: dict | None = None) -> dict:
    """``not_in_documents`` (bool: the answer may not be in the library), its score and the signals behind it.

    Empty when no flag model has been fitted. Fitted on the e5 retrieval scores of the CPU profile, one model for
    six-option questions and one for questions without options (:func:`flag_key`).
    """
    try:
        model = model or load_weights()
    except FileNotFoundError:
        return {}
    key = flag_key(q)
    if not model.get(key) or not reranked:
        return {}
    feats = flag_features(library, q, reranked, evidence)
    score = flag_score(feats, model, key)
    return {"not_in_documents": bool(score > model[key]["threshold"]), "not_in_documents_score": score,
            "flag_features": feats}
