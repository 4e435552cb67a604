"""Stage 5 — option-aware reranking: score (question, six options, chunk).

No multilingual cross-encoder ships in any package, so the CPU reranker is
built from what is installed and measured: for each candidate, the evidence
for the best-supported option, dense (question + option against the chunk)
and lexical (BM25 of the option's own words), fused with the retrieval score.
A GPU profile plugs a cross-encoder in behind the same interface.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

from .embedders import Embedder
from .index import Library
from .retrieval import zscores
from .settings import Settings
from .types import Candidate, Question


class Reranker(ABC):
    @abstractmethod
    def score(self, q: Question, candidates: list[Candidate]) -> list[float]: ...

    def rerank(self, q: Question, candidates: list[Candidate]) -> list[Candidate]:
        if not candidates:
            return []
        for c, s in zip(candidates, self.score(q, candidates)):
            c.scores["rerank"] = float(s)
        out = sorted(candidates, key=lambda c: c.scores["rerank"], reverse=True)
        for r, c in enumerate(out, 1):
            c.rank = r
        return out


class NoReranker(Reranker):
    def score(self, q, candidates):
        return [c.scores["fused"] for c in candidates]


class OptionEvidenceReranker(Reranker):
    def __init__(self, library: Library, embedder: Embedder, settings: Settings):
        self.library, self.embedder, self.settings = library, embedder, settings

    def score(self, q: Question, candidates: list[Candidate]) -> list[float]:
        ids = [c.chunk.chunk_id for c in candidates]
        opts = [o for o in q.options if o.strip()]
        if not opts:
            return [c.scores["fused"] for c in candidates]
        qv = self.embedder.embed_queries([f"{q.text}\n{o}" for o in opts])  # (n_opt, d)
        sims = self.library.embeddings(ids) @ qv.T  # (n_cand, n_opt)
        dense_opt = dict(zip(ids, sims.max(axis=1).tolist()))
        lex = [self.library.lexical_scores(o) for o in opts]
        lex_opt = {i: max(l.get(i, 0.0) for l in lex) for i in ids}
        fz = zscores({c.chunk.chunk_id: c.scores["fused"] for c in candidates})
        dz, lz = zscores(dense_opt), zscores(lex_opt)
        w = self.settings.rerank_option_weight
        out = []
        for c in candidates:
            i = c.chunk.chunk_id
            c.scores["option_dense"] = float(dense_opt[i])
            c.scores["option_lexical"] = float(lex_opt[i])
            out.append((1 - w) * fz[i] + w * 0.5 * (dz[i] + lz[i]))
        return out


RERANKERS: dict[str, type] = {}  # optional backends (remote, vllm), registered if their module imports


def make_reranker(settings: Settings, library: Library, embedder: Embedder) -> Reranker:
    if settings.reranker == "none":
        return NoReranker()
    if settings.reranker != "options":
        from .backends import optional_backend

        return optional_backend("reranker", settings.reranker, RERANKERS)(settings)
    return OptionEvidenceReranker(library, embedder, settings)
