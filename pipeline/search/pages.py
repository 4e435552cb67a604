"""Stage 5b — the page inside the top document: re-score its passages with the question and each option.

Long rulebooks repeat one template on many pages (articles that differ only in names, numbers and
deadlines). There every article holds *some* option, so evidence for an option alone (the
reranker's) does not tell the pages apart; what does is the question's own words (who, which
programme, which clause) *and* an option's words on the same passage. So, after reranking, the
candidates from the top document are scored by BM25 of the question joined with each option (the
best option counts), fused with their reranking score, and re-ordered among the places they already
hold: other documents' candidates keep their ranks, so the document choice does not change.
Only documents of at least ``page_min_pages`` pages are re-scored (short leaflets are left alone).

With ``page_expand`` > 0, the top document's passages that retrieval left out of the pool are searched
too: its ``page_expand`` best by that joint BM25 join the re-scoring (after the pool, each with the
lowest reranking score of the document's pooled passages), so a page retrieval missed can still be
read when the question and one option meet on it.
"""
from __future__ import annotations

from ..index import Library
from .retrieval import query_text, zscores
from ..settings import Settings
from ..types import Candidate, CandidateScores, Question


def joint_lexical(library: Library, q: Question, ids: list[str]) -> dict[str, float]:
    """For each chunk id, the best BM25 score of "question + option" over the non-empty options."""
    opts = [o for o in q.options if o.strip()] or [""]
    best = {i: 0.0 for i in ids}
    for o in opts:
        scores = library.lexical_scores(f"{q.text}\n{o}")
        for i in ids:
            best[i] = max(best[i], scores.get(i, 0.0))
    return best


def expansion(library: Library, q: Question, doc_hash: str, have: set[str], n: int, settings: Settings,
              embedder=None) -> list[Candidate]:
    """The ``n`` passages of the document ``doc_hash`` not in ``have`` with the best joint BM25 (none scoring 0),
    each with the retrieval query's lexical score and, given the ``embedder``, its dense one (what the later
    stages read off a candidate, e.g. the not-in-documents flag's top similarity)."""
    rest = [c for c in library.chunks_of(doc_hash) if c.chunk_id not in have]
    joint = joint_lexical(library, q, [c.chunk_id for c in rest])
    best = sorted((c for c in rest if joint[c.chunk_id] > 0), key=lambda c: joint[c.chunk_id], reverse=True)[:n]
    if not best:
        return []
    lexical = library.lexical_scores(query_text(q, settings, instruction=False))
    out = [Candidate(c, CandidateScores(page_expanded=1.0, lexical=float(lexical.get(c.chunk_id, 0.0))), 0)
           for c in best]
    if embedder is not None:
        qvec = embedder.embed_queries([query_text(q, settings)])[0]
        vecs = library.vectors.get([c.chunk.chunk_id for c in out])  # a chunk still embedding has none
        out = [c.scored(dense=float(vecs[c.chunk.chunk_id] @ qvec)) if c.chunk.chunk_id in vecs else c for c in out]
    return out


def rescore_pages(q: Question, reranked: list[Candidate], library: Library, settings: Settings,
                  embedder=None) -> list[Candidate]:
    """``reranked`` with the top document's candidates (among the first ``page_pool``) re-ordered (new candidates)
    (``embedder``: the query's, to give passages added by ``page_expand`` their dense score)."""
    w = settings.pages.page_rescore_weight
    if not reranked or w <= 0:
        return reranked
    pool = reranked[: settings.pages.page_pool]
    top_doc = pool[0].chunk.doc_hash
    info = library.find(top_doc)
    if info is None or info.n_pages < settings.pages.page_min_pages:
        return reranked
    slots = [k for k, c in enumerate(pool) if settings.pages.page_scope == "all" or c.chunk.doc_hash == top_doc]
    extra = expansion(library, q, top_doc, {c.chunk.chunk_id for c in reranked}, settings.pages.page_expand, settings,
                      embedder) if settings.pages.page_expand > 0 else []
    if len(slots) + len(extra) < 2:
        return reranked
    mine = [pool[k] for k in slots]
    ids = [c.chunk.chunk_id for c in mine + extra]
    joint = joint_lexical(library, q, ids)
    rz = zscores({c.chunk.chunk_id: c.scores.get("rerank", c.scores.get("fused", 0.0)) for c in mine})
    floor = min(rz.values())
    rz.update({c.chunk.chunk_id: floor for c in extra})
    jz = zscores(joint)
    n_pool = len(reranked[: settings.pages.page_pool])
    slots = slots + list(range(n_pool, n_pool + len(extra)))  # the added passages' places: after the pool
    mine = mine + extra
    reranked = reranked[:n_pool] + extra + reranked[n_pool:]
    mine = [c.scored(page_joint=float(joint[c.chunk.chunk_id]),
                     page=float((1 - w) * rz[c.chunk.chunk_id] + w * jz[c.chunk.chunk_id])) for c in mine]
    mine.sort(key=lambda c: c.scores.page, reverse=True)
    out = list(reranked)
    for k, c in zip(slots, mine):
        out[k] = c
    return [c.ranked(r) for r, c in enumerate(out, 1)]
