"""The "may not be in your documents" signal: retrieval-only features and a fitted logistic model.

``flag_features`` measures how well the evidence, and the documents retrieval ranked first, cover the question's
words, each weighted by how rare it is in the language (so a feature means the same in a library of one leaflet
as in one of forty documents), and how the retrieval scores stand; ``flag_score`` turns them into a
probability-like score with the logistic model fitted in ``pipeline/answering/weights.json`` (``python -m
bench.flag``, over libraries of 1, 3, 10 and all documents). No LLM.

The decision rests only on what was really scored. The dense features (``dense_top``, ``dense_ev``) come
only from candidates that have a dense score, and only when every document of the library had its vectors
when it was searched: a chunk without a vector is neither evidence of absence nor a zero, and a document still
embedding may be the one the question is about even when none of its chunks made the candidates. Otherwise —
documents still embedding, lexical-only retrieval, or an embedder the dense model was not fitted on (its
scores have another scale) — the decision uses the lexical model, fitted on the same questions with the lexical
features alone. ``flag_basis`` says which: "dense+lexical" or "lexical".
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..text import content_terms, term_key, term_keys, words
from ..types import Candidate, Question
from .calibration import load_weights


# ------------------------------------------------------------------
# interrogatives (as lemmas): a question's own words that a document never needs to contain
QUESTION_WORDS = {"скільки", "який", "котрий", "чий", "чому", "навіщо", "нащо", "коли", "куди", "звідки", "хто",
                  "що", "як", "де", "чи", "наскільки", "якою", "яким"}
DENSE = ("dense_top", "dense_ev")  # the features read from one embedder's scores
DENSE_EMBEDDER = "e5"  # the embedder whose scores the dense model was fitted on
DENSE_BASIS, LEXICAL_BASIS = "dense+lexical", "lexical"


_QUESTION_TERMS = {w[:6] for w in QUESTION_WORDS} | {term_key(w) for w in QUESTION_WORDS}


def _terms(text: str) -> set[str]:
    """Content terms (lemmas cut to six characters: "година" in a question meets "години" in a page, "Фервексу"
    meets "Фервекс"), without numbers and interrogatives."""
    return content_terms(text) - _QUESTION_TERMS


def _readings(text: str) -> dict[str, set[str]]:
    """Each content term of ``text`` (:func:`_terms`) with every term its word may stand for (:func:`term_keys`):
    a term counts as held by a page or a library when any of its readings is."""
    terms, out = _terms(text), {}
    for w in words(text):
        k = term_key(w)
        if k in terms:
            out.setdefault(k, {k}).update(term_keys(w))
    return out


@lru_cache(maxsize=1)
def _zipf():
    from wordfreq import zipf_frequency  # the Ukrainian word list ships inside the wheel

    return zipf_frequency


@lru_cache(maxsize=100_000)
def rarity(word: str) -> float:
    """How rare a word is in Ukrainian, whatever the library: 8 − its Zipf frequency (``wordfreq``: 6 is once in a
    thousand words, 3 once in a million); a word it does not know (a medicine's or a team's name) is the rarest,
    8. The flag's word weights and "rarest words" come from here, not from how many documents of this library
    hold a word: in a library of one leaflet every word the leaflet happens not to use would be "rare"."""
    return 8.0 - _zipf()(word, "uk")


COMMON = 2.5  # rarity at or below this (Zipf ≥ 5.5: «має», «чого», «зробити») never names a missing word


def flag_features(library, q: Question, reranked: list[Candidate], evidence: list[Candidate]) -> dict:
    """Retrieval-only signals that the question's document is in the library (higher = more likely present).

    Their meaning does not change with the library's size: the question's words are weighted by how rare they
    are in the language (:func:`rarity`) and compared with the evidence read, with the top candidate's document
    (``…doc1``), and (``rare_absent``) with every document. ``q_cov_idf`` (words weighted by this
    library's document frequencies) is kept for the records, not used by the shipped models. The dense features
    are None when no candidate has a dense score (a chunk without a vector is not a zero)."""
    df, n = library.doc_freq()
    qr = _readings(q.text)
    qdf = {t: max(df.get(r, 0) for r in rs) for t, rs in qr.items()}  # a term's chunks: its most widely held reading's
    form = {}
    for w in words(q.text):
        form.setdefault(term_key(w), w)
    info = {t: rarity(form[t]) for t in qr}
    ev = set()
    for c in evidence:
        ev |= _terms(f"{c.chunk.prefix} {c.chunk.heading} {c.chunk.body}")
    first = library.doc_terms(reranked[0].chunk.doc_hash) if reranked else frozenset()
    covered = {t for t, rs in qr.items() if rs & ev}
    in_first = {t for t, rs in qr.items() if rs & first}
    idf = {t: np.log((n + 1) / (d + 0.5)) for t, d in qdf.items()}
    tot, tot_info = sum(idf.values()) or 1.0, sum(info.values()) or 1.0
    rare = sorted(qr, key=lambda t: (-info[t], t))[:3]  # the question's rarest words in the language (ties: spelling)
    opt_cov = []
    for o in q.options:
        orr = _readings(o)
        opt_cov.append(sum(bool(rs & ev) for rs in orr.values()) / len(orr) if orr else 0.0)
    dense = [c.scores.dense for c in reranked if c.scores.dense is not None]
    top = reranked[0].scores.dense if reranked else None
    share = lambda ts, where: (sum(t in where for t in ts) / len(ts)) if ts else 1.0  # noqa: E731
    return {
        "q_cov": share(qr, covered),
        "q_cov_idf": float(sum(v for t, v in idf.items() if t in covered) / tot),
        "q_cov_info": float(sum(info[t] for t in covered) / tot_info),
        "q_doc1_info": float(sum(info[t] for t in in_first) / tot_info),
        "rare_cov": share(rare, covered),
        "rare_doc1": share(rare, in_first),
        "rare_absent": (sum(qdf[t] == 0 for t in rare) / len(rare)) if rare else 0.0,
        "opt_cov_max": max(opt_cov) if opt_cov else 0.0,
        "opt_cov_mean": float(np.mean(opt_cov)) if opt_cov else 0.0,
        "dense_top": float(max(dense)) if dense else None,
        "dense_ev": float(top) if isinstance(top, float) else None,
        "absent_words": [form[t] for t in sorted(qr, key=lambda t: (-info[t], form[t]))
                         if qdf[t] == 0 and info[t] > COMMON][:8],
        # ^ the question's own words no form of which any document holds, rarest first: for the reader, not a feature
    }


def flag_key(q: Question, basis: str = DENSE_BASIS) -> str:
    """The flag model for a question: ``flag`` (six options, retrieved with them) or ``flag_free`` (no options),
    with ``_lexical`` for the lexical basis."""
    key = "flag" if q.options else "flag_free"
    return key if basis == DENSE_BASIS else f"{key}_lexical"


def flag_basis(feats: dict, embedder: str, lexical_only: list[str]) -> str:
    """"dense+lexical" when every document had its vectors when searched, a candidate has a dense score and the
    embedder is the one the dense model was fitted on; else "lexical"."""
    dense_ok = embedder == DENSE_EMBEDDER and not lexical_only and all(feats.get(k) is not None for k in DENSE)
    return DENSE_BASIS if dense_ok else LEXICAL_BASIS


def flag_score(feats: dict, model: dict, key: str = "flag") -> float:
    """Probability-like score that the question's document is NOT in the library (logistic model)."""
    fm = model[key]
    x = (np.array([feats[n] for n in fm["features"]], dtype=float) - np.asarray(fm["mean"])) / np.asarray(fm["scale"])
    return float(1 / (1 + np.exp(-(x @ np.asarray(fm["weights"]) + fm["bias"]))))


# the library sizes the thresholds were fitted at (bench.flag), and the most documents each stands for
SIZES = (("1", 1), ("3", 5), ("10", 19), ("all", None))


def size_of(n_docs: int) -> str:
    """The fitted library size that stands for a library of ``n_docs`` documents."""
    return next(name for name, most in SIZES if most is None or n_docs <= most)


def threshold(fm: dict, n_docs: int) -> float:
    """The score above which the flag fires in a library of ``n_docs`` documents: each size's threshold lets the
    same small share of questions whose document is present fire (``thresholds``, fitted per size); a model
    fitted without sizes has one ``threshold``."""
    return float((fm.get("thresholds") or {}).get(size_of(n_docs), fm["threshold"]))


def not_in_documents(library, q: Question, reranked: list[Candidate], evidence: list[Candidate],
                     model: dict | None = None, embedder: str = DENSE_EMBEDDER,
                     lexical_only: list[str] | None = None) -> dict:
    """``not_in_documents`` (bool: the answer may not be in the library), its score, the basis it was decided on
    (``flag_basis``) and the signals behind it.

    ``lexical_only``: the documents that had no (or not all their) vectors when the question was searched.
    Empty when no flag model for the basis has been fitted (the app then shows no flag rather than a guess).
    """
    try:
        model = model or load_weights()
    except FileNotFoundError:
        return {}
    if not reranked:
        return {}
    feats = flag_features(library, q, reranked, evidence)
    basis = flag_basis(feats, embedder, lexical_only or [])
    key = flag_key(q, basis)
    if not model.get(key):
        return {}
    score = flag_score(feats, model, key)
    cut = threshold(model[key], len(library.documents()))
    return {"not_in_documents": bool(score > cut), "not_in_documents_score": score, "flag_threshold": cut,
            "flag_basis": basis, "flag_features": feats}
