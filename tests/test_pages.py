"""pipeline/search/pages.py: the top document's passages re-ordered by the question joined with an option."""
from __future__ import annotations

import pytest

from pipeline.index import Library
from pipeline.search.pages import joint_lexical, rescore_pages
from pipeline.settings import load_settings
from pipeline.types import Candidate, Question

ARTICLES = [("Луцьк", "веслування", "450 грн"), ("Вінниця", "фехтування", "600 грн"),
            ("Полтава", "плавання", "750 грн")]


@pytest.fixture(scope="module")
def library(tmp_path_factory, embedder, pdfgen):
    """One document, one near-identical article per page (the template differs only in names and amounts)."""
    sections = [(f"Стаття {i}. Першість України з {sport}",
                 f"{i}.1. Змагання відбуваються у місті {city}.\n"
                 f"{i}.2. Стартовий внесок становить {fee} за кожного учасника.\n"
                 f"{i}.3. Протести подаються головному судді письмово.\n"
                 f"{i}.4. Результати оприлюднюються на сайті Федерації.")
                for i, (city, sport, fee) in enumerate(ARTICLES, 1)]
    lib = Library(tmp_path_factory.mktemp("pages"), embedder, load_settings(use_prefix=False, chunk_tokens=96, chunk_overlap=8, running_edge_lines=2))
    lib.add(pdfgen.ukrainian_pdf("Регламент", sections, pages_hint=3), "reglament.pdf")
    other = [("Розділ 1", "Стартовий внесок за участь у семінарі становить 450 грн.")]
    lib.add(pdfgen.ukrainian_pdf("Інший документ", other), "other.pdf")
    yield lib
    lib.close()


def _question() -> Question:
    # asks about fencing; every option is some article's amount, so an option alone does not pick the page
    return Question("q", "Який стартовий внесок на першості з фехтування?",
                    ["450 грн", "600 грн", "750 грн", "300 грн", "900 грн", "150 грн"], "B", "reglament.pdf", 2)


def _candidates(library: Library) -> list[Candidate]:
    reg = next(d for d in library.documents() if d.name == "reglament.pdf")
    chunks = library.chunks_of(reg.doc_hash)
    other = library.chunks_of(next(d for d in library.documents() if d.name == "other.pdf").doc_hash)
    page_of = {c.pages[0]: c for c in chunks}
    assert set(page_of) >= {1, 2, 3}
    order = [page_of[1], other[0], page_of[3], page_of[2]]  # the reranker got it wrong: page 2 last
    return [Candidate(c, {"rerank": 1.0 - 0.01 * r}, r + 1) for r, c in enumerate(order)]


def test_joint_score_needs_the_question_and_an_option_on_one_passage(library):
    cands = _candidates(library)
    joint = joint_lexical(library, _question(), [c.chunk.chunk_id for c in cands])
    best = max(cands, key=lambda c: joint[c.chunk.chunk_id])
    assert best.chunk.pages == [2]


def test_rescoring_reorders_the_top_document_only_in_its_own_places(library):
    cands = _candidates(library)
    out = rescore_pages(_question(), cands, library, load_settings(page_rescore_weight=0.7, page_min_pages=0))
    assert out[0].chunk.pages == [2]  # fencing's page is now first
    assert out[1].chunk.doc_name == "other.pdf"  # the other document keeps its place
    assert [c.rank for c in out] == [1, 2, 3, 4]
    assert "page" in out[0].scores and "page_joint" in out[0].scores


@pytest.mark.parametrize("over", [dict(page_rescore_weight=0.0, page_min_pages=0),  # off
                                  dict(page_rescore_weight=0.7, page_min_pages=4)])  # the document is too short
def test_off_or_short_document_changes_nothing(library, over):
    cands = _candidates(library)
    ids = [c.chunk.chunk_id for c in cands]
    out = rescore_pages(_question(), cands, library, load_settings(**over))
    assert [c.chunk.chunk_id for c in out] == ids


def test_expansion_brings_in_the_top_documents_page_retrieval_missed(library, embedder):
    cands = [c for c in _candidates(library) if c.chunk.pages != [2]]  # fencing's page never reached the pool
    over = dict(page_rescore_weight=0.7, page_min_pages=0)
    without = rescore_pages(_question(), [Candidate(c.chunk, dict(c.scores), c.rank) for c in cands], library,
                            load_settings(page_expand=0, **over))
    assert all(c.chunk.pages != [2] for c in without)
    out = rescore_pages(_question(), cands, library, load_settings(page_expand=2, **over), embedder)
    assert out[0].chunk.pages == [2] and out[0].scores.get("page_expanded") == 1.0
    # the later stages read the retrieval query's scores off the top passage (the not-in-documents flag)
    assert out[0].scores["dense"] > 0.5 and out[0].scores["lexical"] > 0
    assert out[1].chunk.doc_name == "other.pdf"  # the other document keeps its place
    assert len(out) == len(cands) + 1  # one passage of the document was outside the pool
    assert [c.rank for c in out] == list(range(1, len(out) + 1))
