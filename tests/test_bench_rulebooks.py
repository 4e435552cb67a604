"""bench/rulebooks.py: where the gold page is lost, and the embedding cache that lets it re-index cheaply."""
from __future__ import annotations

import numpy as np

from bench.rulebooks import (NOT_RETRIEVED, PAGE_OUT, READ, RERANK_LOW, CachedEmbedder, Diagnosis, summary,
                             support_weight_table, where_lost)


def test_where_lost_names_the_stage():
    assert where_lost(None, None, False, 2) == NOT_RETRIEVED
    assert where_lost(1, 5, False, 2) == RERANK_LOW
    assert where_lost(4, 2, False, 2) == PAGE_OUT  # read after reranking, pushed out by page choice
    assert where_lost(9, 6, True, 2) == READ  # page choice brought it in
    assert where_lost(None, None, True, 2) == READ  # page choice found it outside the pool (page_expand)


def test_summary_shares_add_up():
    rows = [Diagnosis(str(i), "d.pdf", r, rr, f, where_lost(r, rr, f is not None and f <= 2, 2), True, 1, ok,
                      1.0 if ok else 0.5, [])
            for i, (r, rr, f, ok) in enumerate([(1, 1, 1, True), (None, None, None, False), (3, 4, 4, False),
                                                (2, 1, 3, False)])]
    m = summary(rows)
    assert (m[READ], m[NOT_RETRIEVED], m[RERANK_LOW], m[PAGE_OUT]) == (0.25, 0.25, 0.25, 0.25)
    assert m["page@1"] == 0.25 and m["page_proximity"] == 0.625


def test_support_weights_are_read_off_the_recorded_values_and_chosen_without_the_held_out_document():
    # "a" questions: the model's value alone is right; "b" questions: only with the options' support added
    alone = {"doc": "a.pdf", "gold": "A", "listed_value": [-1.0, -1.2, -9, -9, -9, -9], "listed_support": [0, 1, 0, 0, 0, 0]}
    needs = {"doc": "b.pdf", "gold": "B", "listed_value": [-1.0, -1.2, -9, -9, -9, -9], "listed_support": [0, 1, 0, 0, 0, 0]}
    row = support_weight_table({"s": [alone, alone, needs]}, weights=(0.0, 1.0)).splitlines()[-1]
    # weight 0: both "a" right; weight 1: the "b" one right; held out, "a" is judged by the weight "b" chose and
    # the other way round: nothing right
    assert row == "| s | 3 | 0.667 | 0.333 | 0.000 |", row


class _Counting:
    def __init__(self):
        self.passages = 0

    def embed_passages(self, texts):
        self.passages += len(texts)
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    def embed_queries(self, texts):
        return np.array([[1.0, len(t)] for t in texts], dtype=np.float32)

    def count_word_tokens(self, word):
        return 1


def test_cache_embeds_a_text_once_across_processes(tmp_path):
    inner = _Counting()
    c = CachedEmbedder(inner, tmp_path / "v.npz")
    first = c.embed_passages(["a", "bb"])
    c.save()
    again = CachedEmbedder(inner, tmp_path / "v.npz")  # as a later run would open it
    both = again.embed_passages(["bb", "ccc", "a"])
    assert inner.passages == 3  # "ccc" only was new
    assert np.array_equal(both[0], first[1]) and np.array_equal(both[2], first[0])
    assert not np.array_equal(again.embed_queries(["bb"])[0], first[1])  # queries and passages kept apart


def test_cross_validation_chooses_on_the_other_documents():
    from bench.rulebooks import cross_validated

    def row(variant, doc, read):
        return {"variant": variant, "set": "long", "qid": f"{variant}{doc}", "doc": doc, "retrieval": 1, "rerank": 1,
                "final": 1 if read else None, "stage": READ if read else NOT_RETRIEVED, "doc_right": True, "page": 1,
                "page_right": read, "proximity": 1.0, "read": []}
    # variant "b" wins on documents w, x and y but loses on z: z's own result must not pick "a" for z
    rows = [row("a", d, d == "z") for d in "wxyz"] + [row("b", d, d != "z") for d in "wxyz"]
    m, chosen = cross_validated(rows)
    assert chosen == {"w": "b", "x": "b", "y": "b", "z": "b"}
    assert m[READ] == 3 / 4
