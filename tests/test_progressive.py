"""Progressive indexing (pipeline/index/library.py, indexer.py; retrieval and reranking of chunks without vectors).

A document is searchable by BM25 as soon as its rows are stored; its vectors
follow in the background. The tests hold the background embedding
deterministically (``Library.pause_embedding``) instead of racing it, and use
the real e5 embedder and answer model.
"""
import pymupdf
import pytest

from counting import CountingEmbedder
from pipeline.index import Library
from pipeline.qa import Pipeline
from pipeline.search.retrieval import Retriever
from pipeline.settings import load_settings
from pipeline.types import Question

Q = Question("cleaning", "Як часто слід мити резервуар для води зволожувача?",
             ["щодня", "щомісяця", "щотижня", "раз на рік", "ніколи", "після кожного вмикання"])
PHRASE = "з лимонною кислотою щотижня"




def page_of(pdf: bytes, phrase: str) -> int:
    doc = pymupdf.open(stream=pdf, filetype="pdf")
    return next(i + 1 for i in range(doc.page_count) if phrase in " ".join(doc[i].get_text().split()))


def test_searchable_then_indexed_and_nothing_embedded_twice(tmp_path, embedder, manual_pdf, other_pdf):
    s = load_settings(embed_batch=2)
    counting = CountingEmbedder(embedder)
    lib = Library(tmp_path, counting, s, background=True)
    try:
        stages = []
        lib.add(other_pdf, "rules.pdf", wait=True, progress=lambda st, f: stages.append(st))
        assert stages[:3] == ["parse", "chunk", "store"] and "searchable" in stages and stages[-1] == "indexed"
        lib.pause_embedding()
        stages.clear()
        info = lib.add(manual_pdf, "manual.pdf", progress=lambda st, f: stages.append(st))
        assert stages == ["parse", "chunk", "store", "searchable"]  # returned before any of its vectors
        assert (info.state, info.n_embedded) == ("searchable", 0)
        states = {d.name: d.state for d in lib.documents()}
        assert states == {"rules.pdf": "indexed", "manual.pdf": "searchable"}
        assert lib.lexical_only_documents() == ["manual.pdf"] and lib.pending_chunks() == info.n_chunks

        # hybrid retrieval while it embeds: the manual's chunks are scored by BM25 alone, and the right one is first
        cands = Retriever.for_library(lib, embedder, s).search(Q, k=5)
        assert PHRASE in " ".join(cands[0].chunk.body.split()) and "dense" not in cands[0].scores
        assert any("dense" in c.scores for c in cands)  # the indexed document's chunks keep their dense score

        lib.resume_embedding()
        assert lib.wait_indexed(timeout=600)
        assert [d.state for d in lib.documents()] == ["indexed", "indexed"] and lib.lexical_only_documents() == []
        n = sum(d.n_chunks for d in lib.documents())
        assert lib.vectors._col.count() == n == counting.passages  # each chunk embedded exactly once
        cands = Retriever.for_library(lib, embedder, s).search(Q, k=5)
        assert PHRASE in " ".join(cands[0].chunk.body.split()) and "dense" in cands[0].scores
    finally:
        lib.close()


def test_removed_while_embedding_leaves_no_vectors(tmp_path, embedder, manual_pdf):
    lib = Library(tmp_path, embedder, load_settings(), background=True)
    try:
        lib.pause_embedding()
        info = lib.add(manual_pdf, "manual.pdf")
        assert lib.remove(info.doc_hash)
        lib.resume_embedding()
        assert lib.wait_indexed(timeout=60) and lib.documents() == [] and lib.vectors._col.count() == 0
    finally:
        lib.close()


def test_a_question_while_the_document_is_still_embedding_is_answered_from_the_lexical_index(
        tmp_path, models, manual_pdf, other_pdf):
    pipe = Pipeline(load_settings(), root=tmp_path, models=models, background=True)
    try:
        pipe.library.add(other_pdf, "rules.pdf", wait=True)
        pipe.library.pause_embedding()
        info = pipe.add_pdf(manual_pdf, "manual.pdf")  # returns once searchable
        assert info.state == "searchable"
        a = pipe.ask(Q)
        assert pipe.library.pending_chunks(info.doc_hash) == info.n_chunks  # still nothing embedded
        assert a.details["lexical_only_docs"] == ["manual.pdf"]
        assert a.letter == "C" and a.doc_name == "manual.pdf" and a.page == page_of(manual_pdf, PHRASE)
        pipe.library.resume_embedding()
        assert pipe.library.wait_indexed(timeout=600)
        assert pipe.ask(Q).details["lexical_only_docs"] == []
    finally:
        pipe.library.close()


@pytest.mark.timeout(1800)
def test_a_document_still_embedding_is_not_said_to_be_missing(tmp_path, models):
    """Issue 26: asked at once after an upload (searchable, no vectors yet) in a one-document library, neither the
    six-option answer nor the free-form one says the answer may not be in the documents; the flag decides on the
    lexical features (a chunk without a vector is not a zero) and says so; the same once the document is indexed.
    ``Pipeline.ask`` as every caller runs it (the web app follows its stages through ``on_stage``). The browser
    test's document and question (tests/browser/test_searchable.py)."""
    from browser import docs as D

    question, options, gold = D.HEATER_Q
    q = Question("heater", question, options)
    pipe = Pipeline(load_settings(), root=tmp_path, models=models, background=True)
    try:
        pipe.library.pause_embedding()
        info = pipe.add_pdf(D.heater_pdf(), "vodonagrivach.pdf")
        assert info.state == "searchable"
        for state, basis, still in (("searchable", "lexical", ["vodonagrivach.pdf"]), ("indexed", "dense+lexical", [])):
            stages = []
            a = pipe.ask(q, on_stage=lambda name, result: stages.append((name, result)))
            assert [n for n, _ in stages] == ["search", "answer"] and stages[1][1] is a
            assert list(stages[0][1].lexical_only) == still, state  # noted before the search began
            assert a.details["not_in_documents"] is False, (state, a.details.get("flag_features"))
            assert a.letter == gold and a.doc_name == "vodonagrivach.pdf", (state, a.letter, a.doc_name)
            assert a.details["flag_basis"] == basis and a.details["lexical_only_docs"] == still, state
            fa = pipe.ask(Question("heater-free", question, []))
            assert fa.details["not_in_documents"] is False and fa.details["tries"], (state, fa.reasons)
            assert not fa.abstained and fa.doc_name == "vodonagrivach.pdf", (state, fa.reasons)
            assert fa.details["flag_basis"] == basis and fa.details["lexical_only_docs"] == still, state
            if state == "searchable":
                assert pipe.library.pending_chunks(info.doc_hash) == info.n_chunks  # still nothing embedded
                pipe.library.resume_embedding()
                assert pipe.library.wait_indexed(timeout=600)
    finally:
        pipe.library.close()
