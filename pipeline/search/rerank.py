"""Stage 5 — option-aware reranking: score (question, six options, chunk), then reorder.

No multilingual cross-encoder ships in any package, so the CPU reranker
(``options``) is built from the index and the embedder: for each candidate,
the evidence for the best-supported option, dense (question + option against
the chunk) and lexical (BM25 of the option's own words), fused with the
retrieval score. A GPU or remote profile plugs a cross-encoder model in behind
the same ``Reranker`` interface (``pipeline.backends``); ``none`` keeps the
retrieval order.
"""
from __future__ import annotations

from ..backends.base import Embedder, Reranker
from ..index.lexical import LexicalIndex
from ..index.vectors import VectorIndex
from .retrieval import zscores
from ..settings import Settings
from ..types import Candidate, Question


def apply_scores(candidates: list[Candidate], scores: list[float],
                 extra: list[dict[str, float]] | None = None) -> list[Candidate]:
    """New candidates with their ``rerank`` score (and the reranker's ``extra`` scores), best first, ranks
    renumbered; ``candidates`` are left as they were."""
    extra = extra or [{} for _ in candidates]
    new = [c.scored(**e, rerank=float(s)) for c, s, e in zip(candidates, scores, extra)]
    out = sorted(new, key=lambda c: c.scores.rerank, reverse=True)
    return [c.ranked(r) for r, c in enumerate(out, 1)]


def rerank(reranker: Reranker, q: Question, candidates: list[Candidate]) -> list[Candidate]:
    if not candidates:
        return []
    if isinstance(reranker, OptionEvidenceReranker):  # its option evidence goes to the trace
        scored = reranker.scored(q, candidates)
        return apply_scores(candidates, [s for s, _ in scored], [e for _, e in scored])
    return apply_scores(candidates, reranker.score(q, candidates))


class NoReranker(Reranker):
    def score(self, q, candidates):
        return [c.scores.fused for c in candidates]


class OptionEvidenceReranker(Reranker):
    def __init__(self, dense: VectorIndex, lexical: LexicalIndex, embedder: Embedder, settings: Settings):
        self.dense, self.lexical, self.embedder, self.settings = dense, lexical, embedder, settings

    def score(self, q: Question, candidates: list[Candidate]) -> list[float]:
        return [s for s, _ in self.scored(q, candidates)]

    def scored(self, q: Question, candidates: list[Candidate]) -> list[tuple[float, dict[str, float]]]:
        """Each candidate's score and its option evidence (``option_dense``, ``option_lexical``)."""
        ids = [c.chunk.chunk_id for c in candidates]
        opts = [o for o in q.options if o.strip()]
        if not opts:
            return [(c.scores.fused, {}) for c in candidates]
        qv = self.embedder.embed_queries(option_queries(q))  # (n_opt, d)
        vecs = self.dense.get(ids)  # a chunk still embedding has none: its option evidence is lexical only
        dense_opt = {i: float((v @ qv.T).max()) for i, v in vecs.items()}
        lex = [self.lexical.scores(o) for o in opts]
        lex_opt = {i: max(l.get(i, 0.0) for l in lex) for i in ids}
        fz = zscores({c.chunk.chunk_id: c.scores.fused for c in candidates})
        dz, lz = zscores(dense_opt), zscores(lex_opt)
        w = self.settings.rerank.rerank_option_weight
        out = []
        for c in candidates:
            i = c.chunk.chunk_id
            ev = {"option_dense": float(dense_opt[i])} if i in dense_opt else {}
            ev["option_lexical"] = float(lex_opt[i])
            out.append(((1 - w) * fz[i] + w * (0.5 * (dz[i] + lz[i]) if i in dz else lz[i]), ev))
        return out


def option_queries(q: Question) -> list[str]:
    """The query texts the ``options`` reranker embeds for a question."""
    return [f"{q.text}\n{o}" for o in q.options if o.strip()]


def make_reranker(settings: Settings, library, embedder, model: Reranker | None) -> Reranker:
    """The profile's reranker over ``library``'s indexes: ``options``, ``none``, or the loaded ``model``."""
    if settings.rerank.reranker == "none":
        return NoReranker()
    if settings.rerank.reranker == "options":
        return OptionEvidenceReranker(library.vectors, library.lexical, embedder, settings)
    return model
