"""The "may not be in your documents" signal: retrieval-only features and a fitted logistic model.

``flag_features`` measures how well the evidence, and the documents retrieval ranked first, cover the question's
words, each weighted by how rare it is in the language (so a feature means the same in a library of one leaflet
as in one of forty documents), and how the retrieval scores stand; ``flag_score`` turns them into a
probability-like score with the logistic model fitted in ``pipeline/answering/weights.json`` (``python -m
bench.flag``, over libraries of 1, 3, 10 and all documents). No LLM.

Only the question's content words count (:func:`is_content`: names, terms, numbers, nouns a document about the
question's subject would have to hold): a verb, an adverb, a common adjective or an ordinary noun («дозволено»,
«статися», «безпечно», «одночасне», «вживання», «компанія») is the asker's wording, which a document that holds
the answer may well not use, so its absence is no evidence and it never decides the flag alone.

The decision rests only on what was really scored. The dense features (``dense_top``, ``dense_ev``) come
only from candidates that have a dense score, and only when every document of the library had its vectors
when it was searched: a chunk without a vector is neither evidence of absence nor a zero, and a document still
embedding may be the one the question is about even when none of its chunks made the candidates. Otherwise —
documents still embedding, lexical-only retrieval, or an embedder the dense model was not fitted on (its
scores have another scale) — the decision uses the lexical model, fitted on the same questions with the lexical
features alone. ``flag_basis`` says which: "dense+lexical" or "lexical".
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from ..text import _morph, content_terms, term_key, term_keys, words
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


_APOSTROPHE_AT = re.compile(r"(?<=[бпвмфрз])(?=[яюєї])")  # where Ukrainian writes an apostrophe: «м'які», «п'ять»


@lru_cache(maxsize=100_000)
def spelled(word: str) -> str:
    """A word as the dictionary spells it: :func:`pipeline.text.words` takes the apostrophe out («мякі»), which
    would make an ordinary word unknown, i.e. a name; it is put back where Ukrainian writes one («м'які»)."""
    morph = _morph()
    if morph.word_is_known(word):
        return word
    for m in _APOSTROPHE_AT.finditer(word):
        again = f"{word[:m.start()]}'{word[m.start():]}"
        if morph.word_is_known(again):
            return again
    return word


@lru_cache(maxsize=100_000)
def rarity(word: str) -> float:
    """How rare a word is in Ukrainian, whatever the library: 8 − its Zipf frequency (``wordfreq``: 6 is once in a
    thousand words, 3 once in a million); a word it does not know (a medicine's or a team's name) is the rarest,
    8. The flag's word weights and "rarest words" come from here, not from how many documents of this library
    hold a word: in a library of one leaflet every word the leaflet happens not to use would be "rare"."""
    return 8.0 - _zipf()(spelled(word.lower()), "uk")


# What counts as a content word (is_content). Decided from the language, never from a library or a kind of
# document: wordfreq's Ukrainian frequencies (Zipf: 5 is once in 10,000 words, 3 once in a million) and the parts
# of speech of pymorphy3's Ukrainian dictionary.
NAMING_COMMON_ZIPF = 5.0  # a noun this frequent or more («рік», «дитина», «компанія», «слід») is ordinary
DESCRIBING_COMMON_ZIPF = 2.5  # an adjective or action noun counts only when rarer (a term: «отологічного»)
_NAMING = {"NOUN"}
_DESCRIBING = {"ADJF", "ADJS", "COMP"}
_ACTION_ENDINGS = ("ння", "ття")  # Ukrainian nouns of an action, made from a verb: «вживання», «застосування»
_CYRILLIC_LETTER = re.compile(r"[\u0400-\u04ff]")


@lru_cache(maxsize=100_000)
def is_content(word: str) -> bool:
    """Whether a question's word is a content word: one whose absence from every document says the question's
    subject is not there. The question's own wording (how it asks) is not: a document that holds the answer need
    not use the question's verb or adverb, nor its ordinary nouns and adjectives. From the word alone:

    * a word with a digit, a word without Cyrillic letters («Fructis», «B12») or one pymorphy3's dictionary does
      not know (a medicine's, a product's or a team's name: «ретаболіл», «фервекс») — **content**;
    * a word that can be read as a noun naming a thing («музею», «квиток», «парацетамолу», «мг») — content
      unless it is among the language's most frequent words (Zipf ≥ :data:`NAMING_COMMON_ZIPF`: «рік»,
      «дитина», «компанія»; «ціна», at 4.98, still counts);
    * an adjective, or a noun of an action made from a verb (-ння, -ття: «вживання», «застосування») — it
      describes how the question asks; content only when rare in the language (Zipf < :data:`DESCRIBING_COMMON_ZIPF`:
      «отологічного», «неускладнених»; not «одночасне», «побічні», «художнього»);
    * anything else (verbs, infinitives, participles, adverbs, predicatives, pronouns, prepositions, particles:
      «дозволено», «статися», «виникати», «безпечно», «рекомендовано») — never.
    """
    w = word.lower()
    if any(ch.isdigit() for ch in w) or not _CYRILLIC_LETTER.search(w):
        return True
    morph, w = _morph(), spelled(w)
    if not morph.word_is_known(w):
        return True
    parses = morph.parse(w)
    zipf = _zipf()(w, "uk")
    if any(p.tag.POS in _NAMING and not p.normal_form.endswith(_ACTION_ENDINGS) for p in parses):
        return zipf < NAMING_COMMON_ZIPF
    if any(p.tag.POS in _DESCRIBING or p.tag.POS in _NAMING for p in parses):
        return zipf < DESCRIBING_COMMON_ZIPF
    return False


def flag_features(library, q: Question, reranked: list[Candidate], evidence: list[Candidate]) -> dict:
    """Retrieval-only signals that the question's document is in the library (higher = more likely present).

    Their meaning does not change with the library's size: the question's content words (:func:`is_content`)
    are weighted by how rare they are in the language (:func:`rarity`) and compared with the evidence read, with
    the top candidate's document (``…doc1``), and (``rare_absent``) with every document. The question's other
    words weigh nothing: a question with no content word has nothing missing (coverage 1). ``q_cov_idf`` (every
    word weighted by this library's document frequencies) is kept for the records, not used by the shipped
    models. The dense features are None when no candidate has a dense score (a chunk without a vector is not a
    zero)."""
    df, n = library.doc_freq()
    qr = _readings(q.text)
    qdf = {t: max(df.get(r, 0) for r in rs) for t, rs in qr.items()}  # a term's chunks: its most widely held reading's
    form = {}
    for w in words(q.text):
        form.setdefault(term_key(w), w)
    content = [t for t in qr if is_content(form[t])]
    info = {t: rarity(form[t]) for t in content}
    ev = set()
    for c in evidence:
        ev |= _terms(f"{c.chunk.prefix} {c.chunk.heading} {c.chunk.body}")
    first = library.doc_terms(reranked[0].chunk.doc_hash) if reranked else frozenset()
    covered = {t for t, rs in qr.items() if rs & ev}
    in_first = {t for t, rs in qr.items() if rs & first}
    idf = {t: np.log((n + 1) / (d + 0.5)) for t, d in qdf.items()}
    tot = sum(idf.values()) or 1.0
    rare = sorted(content, key=lambda t: (-info[t], t))[:3]  # the question's rarest content words (ties: spelling)
    opt_cov = []
    for o in q.options:
        orr = _readings(o)
        opt_cov.append(sum(bool(rs & ev) for rs in orr.values()) / len(orr) if orr else 0.0)
    dense = [c.scores.dense for c in reranked if c.scores.dense is not None]
    top = reranked[0].scores.dense if reranked else None
    share = lambda ts, where: (sum(t in where for t in ts) / len(ts)) if ts else 1.0  # noqa: E731
    weighed = lambda where: (sum(info[t] for t in content if t in where) / sum(info.values())  # noqa: E731
                             if sum(info.values()) > 0 else 1.0)
    return {
        "q_cov": share(content, covered),
        "q_cov_idf": float(sum(v for t, v in idf.items() if t in covered) / tot),
        "q_cov_info": float(weighed(covered)),
        "q_doc1_info": float(weighed(in_first)),
        "rare_cov": share(rare, covered),
        "rare_doc1": share(rare, in_first),
        "rare_absent": (sum(qdf[t] == 0 for t in rare) / len(rare)) if rare else 0.0,
        "opt_cov_max": max(opt_cov) if opt_cov else 0.0,
        "opt_cov_mean": float(np.mean(opt_cov)) if opt_cov else 0.0,
        "dense_top": float(max(dense)) if dense else None,
        "dense_ev": float(top) if isinstance(top, float) else None,
        # for the reader, not features: the question's content words no form of which any document holds, and
        # those the passages read do not hold, rarest first
        "absent_words": [form[t] for t in sorted(content, key=lambda t: (-info[t], form[t])) if qdf[t] == 0][:8],
        "unmatched_words": [form[t] for t in sorted(content, key=lambda t: (-info[t], form[t]))
                            if t not in covered][:8],
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
