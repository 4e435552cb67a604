"""Fusion as a pure function (pipeline.search.retrieval.fuse, hybrid_pool), and candidates that stages never
change in place (pipeline.search.rerank.apply_scores): no index, no model."""
import dataclasses

import pytest

from pipeline.search.rerank import apply_scores
from pipeline.search.retrieval import fuse, hybrid_pool
from pipeline.types import Candidate, CandidateScores, Chunk


def test_hybrid_pool_is_the_dense_hits_then_the_best_lexical_ones_each_once():
    dense = {"a": 0.9, "b": 0.8}
    lexical = {"c": 5.0, "a": 4.0, "d": 1.0, "e": 3.0}
    assert hybrid_pool(dense, lexical, pool_k=2) == ["a", "b", "c"]  # c and a are BM25's best two; a once
    assert hybrid_pool(dense, lexical, pool_k=3) == ["a", "b", "c", "e"]


def test_fuse_mixes_z_scores_over_the_pool_and_keeps_a_chunk_without_a_vector_lexical():
    dense = {"a": 1.0, "b": 0.0}  # z over {a, b}: +1, -1
    lexical = {"a": 0.0, "b": 2.0, "c": 4.0}  # z over {a, b, c}: mean 2, sd sqrt(8/3)
    sd = (8 / 3) ** 0.5
    got = fuse("hybrid", dense, lexical, ["a", "b", "c"], dense_weight=0.7)
    assert got["a"] == pytest.approx(0.7 * 1 + 0.3 * (0 - 2) / sd)
    assert got["b"] == pytest.approx(0.7 * -1 + 0.3 * 0)
    assert got["c"] == pytest.approx((4 - 2) / sd)  # no dense score (still embedding): its lexical z alone
    assert fuse("dense", dense, lexical, [], 0.7) == dense and fuse("bm25", dense, lexical, [], 0.7) == lexical


def _cand(i: int, fused: float) -> Candidate:
    return Candidate(Chunk(f"d:{i}", "d", "d.pdf", i, "", "текст", "", [(1, 0, 5)]), {"fused": fused}, i + 1)


def test_reranking_makes_new_candidates_and_leaves_the_retrieved_ones_as_they_were():
    retrieved = [_cand(0, 2.0), _cand(1, 1.0), _cand(2, 0.5)]
    before = [dataclasses.replace(c, scores=dict(c.scores)) for c in retrieved]
    out = apply_scores(retrieved, [0.1, 0.9, 0.5], [{"option_lexical": 1.0}, {}, {}])
    assert [c.chunk.index for c in out] == [1, 2, 0] and [c.rank for c in out] == [1, 2, 3]
    assert out[2].scores == {"fused": 2.0, "option_lexical": 1.0, "rerank": 0.1}
    assert retrieved == before  # scores and ranks of the retrieval stage untouched
    with pytest.raises(dataclasses.FrozenInstanceError):
        retrieved[0].rank = 5


def test_candidate_scores_are_a_typed_immutable_record_read_as_the_measured_ones():
    c = _cand(0, 2.0)
    assert isinstance(c.scores, CandidateScores) and c.scores.fused == 2.0 and c.scores.dense is None
    assert dict(c.scores) == {"fused": 2.0} and "dense" not in c.scores and c.scores.get("rerank", -1.0) == -1.0
    later = c.scored(rerank=0.3, page=0.1)
    assert (later.scores.rerank, later.scores.page) == (0.3, 0.1) and list(later.scores) == ["fused", "rerank", "page"]
    assert dict(c.scores) == {"fused": 2.0}  # the earlier stage's record unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.scores.fused = 1.0
    with pytest.raises(TypeError):  # a name no stage writes
        c.scored(ranker=1.0)
    with pytest.raises(TypeError):
        Candidate(c.chunk, {"fussed": 1.0}, 1)
