"""Stage 5b — the page inside the top document: re-score its passages with the question and each option.

Long rulebooks repeat one template on many pages (articles that differ only in names, numbers and
deadlines). There every article holds *some* option, so evidence for an option alone (the
reranker's) does not tell the pages apart; what does is the question's own words (who, which
programme, which clause) *and* an option's words on the same passage. So, after reranking, the
candidates from the top document are scored by BM25 of the question joined with each option (the
best option counts), fused with their reranking score, and re-ordered among the places they already
hold: other documents' candidates keep their ranks, so the document choice does not change.
Only documents of at least ``page_min_pages`` pages are re-scored (short leaflets are left alone).
"""
from __future__ import annotations

from ..index import Library
from .retrieval import zscores
from ..settings import Settings
from ..types import Candidate, Question


def joint_lexical(library: Library, q: Question, ids: list[str]) -> dict[str, float]:
    """For each chunk id, the best BM25 score of "question + option" over the non-empty options."""
    opts = [o for o in q.options if o.strip()] or [""]
    best = {i: 0.0 for i in ids}
    for o in opts:
        scores = library.lexical_scores(f"{q.text}\n{o}")
        for i in ids:
            best[i] = max(best[i], scores.get(i, 0.0))
    return best


def rescore_pages(q: Question, reranked: list[Candidate], library: Library, settings: Settings) -> list[Candidate]:
    """``reranked`` with the top document's candidates (among the first ``page_pool``) re-ordered in place."""
    w = settings.page_rescore_weight
    if not reranked or w <= 0:
        return reranked
    pool = reranked[: settings.page_pool]
    top_doc = pool[0].chunk.doc_hash
    info = library.find(top_doc)
    if info is None or info.n_pages < settings.page_min_pages:
        return reranked
    slots = [k for k, c in enumerate(pool) if settings.page_scope == "all" or c.chunk.doc_hash == top_doc]
    if len(slots) < 2:
        return reranked
    mine = [pool[k] for k in slots]
    ids = [c.chunk.chunk_id for c in mine]
    joint = joint_lexical(library, q, ids)
    rz = zscores({c.chunk.chunk_id: c.scores.get("rerank", c.scores.get("fused", 0.0)) for c in mine})
    jz = zscores(joint)
    for c in mine:
        i = c.chunk.chunk_id
        c.scores["page_joint"] = float(joint[i])
        c.scores["page"] = float((1 - w) * rz[i] + w * jz[i])
    mine.sort(key=lambda c: c.scores["page"], reverse=True)
    out = list(reranked)
    for k, c in zip(slots, mine):
        out[k] = c
    for r, c in enumerate(out, 1):
        c.rank = r
    return out
