"""The "may not be in your documents" signal: retrieval-only features and a fitted logistic model.

``flag_features`` measures how well the evidence covers the question's words (and its rarest words) and how
the retrieval scores stand; ``flag_score`` turns them into a probability-like score with the logistic model
fitted in ``pipeline/answering/weights.json`` (``python -m bench.answer_quality fit``). No LLM.
"""
from __future__ import annotations

import numpy as np

from ..text import normalize
from ..types import Candidate, Question
from .calibration import load_weights


# ------------------------------------------------------------------
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


def flag_key(q: Question) -> str:
    """The flag model for a question: ``flag`` (six options, retrieved with them) or ``flag_free`` (no options)."""
    return "flag" if q.options else "flag_free"


def flag_score(feats: dict, model: dict, key: str = "flag") -> float:
    """Probability-like score that the question's document is NOT in the library (logistic model)."""
    fm = model[key]
    x = (np.array([feats[n] for n in fm["features"]]) - np.asarray(fm["mean"])) / np.asarray(fm["scale"])
    return float(1 / (1 + np.exp(-(x @ np.asarray(fm["weights"]) + fm["bias"]))))


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
