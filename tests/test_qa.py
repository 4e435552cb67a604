"""End to end with the real models: generated PDFs with known answers."""
import pytest

from pipeline.errors import EmptyLibrary
from pipeline.qa import Pipeline
from pipeline.settings import load_settings
from testkit.pdfgen import page_of
from pipeline.types import Question


@pytest.fixture(scope="module")
def pipe(manual_pipe):
    return manual_pipe


CASES = [
    (Question("warranty", "Яким є строк гарантії на зволожувач «Росинка-7»?",
              ["12 місяців", "24 місяці", "6 місяців", "36 місяців", "48 місяців", "гарантії немає"]),
     "D", "строком 36 місяців"),
    (Question("cleaning", "Як часто слід мити резервуар для води зволожувача?",
              ["щодня", "щомісяця", "щотижня", "раз на рік", "ніколи", "після кожного вмикання"]),
     "C", "з лимонною кислотою щотижня"),
]


@pytest.mark.parametrize("q,letter,phrase", CASES, ids=[c[0].qid for c in CASES])
def test_answers_with_document_and_page(pipe, manual_pdf, q, letter, phrase):
    a = pipe.ask(q)
    assert a.doc_name == "humidifier_manual.pdf"
    assert a.page == page_of(manual_pdf, phrase)
    assert a.letter == letter, a.probabilities
    assert abs(sum(a.probabilities.values()) - 1) < 1e-6 and set(a.probabilities) == set("ABCDEF")
    assert a.evidence and a.evidence[0] is a.candidates[0] and phrase.split()[-1] in a.evidence[0].chunk.body
    assert {"retrieve", "rerank", "answer"} <= set(a.timings)
    c = a.candidates[0]
    assert {"dense", "lexical", "fused", "rerank"} <= set(c.scores)


def test_empty_library_says_so(tmp_path, models):
    with pytest.raises(EmptyLibrary, match="empty"):
        Pipeline(load_settings(), root=tmp_path, models=models).ask(CASES[0][0])


def test_not_in_documents_flag(pipe):
    """Fires for a question about a document the library lacks, not for one about a document it holds."""
    from pipeline.answering.flag import not_in_documents

    absent = Question("absent", "Яку максимальну швидкість розвиває електросамокат «Вітерець-3» з батареєю 10 А·год?",
                      ["15 км/год", "20 км/год", "25 км/год", "30 км/год", "35 км/год", "40 км/год"])
    flags = {}
    for q in (CASES[0][0], absent):
        reranked = list(pipe.search(q).reranked)
        flags[q.qid] = not_in_documents(pipe.library, q, reranked, pipe.evidence(reranked, 2))
    assert flags["absent"]["not_in_documents"] is True, flags
    assert flags["warranty"]["not_in_documents"] is False, flags
    assert flags["absent"]["not_in_documents_score"] > flags["warranty"]["not_in_documents_score"]


def test_the_passages_read_come_from_different_pages_only_when_the_top_document_is_long():
    """``Pipeline.evidence``: ``distinct_pages`` applies where the top passage's document has ``page_min_pages``
    pages or more (a long document's short chunks); a leaflet's two best chunks of one page are both read."""
    from types import SimpleNamespace

    from pipeline.types import Candidate, Chunk

    def on(i, doc, page):
        return Candidate(Chunk(f"{doc}:{i}", doc, f"{doc}.pdf", i, "", "текст", "", [(page, 0, 5)]), {}, i)

    pages = {"long": 120, "short": 12}
    lib = SimpleNamespace(find=lambda h: SimpleNamespace(n_pages=pages[h]), chunks=lambda ids: [])
    for doc, want in (("long", ["long:1", "long:3"]), ("short", ["short:1", "short:2"])):
        ranked = [on(1, doc, 7), on(2, doc, 7), on(3, doc, 9)]
        fake = SimpleNamespace(settings=load_settings(), library=lib)
        assert [c.chunk.chunk_id for c in Pipeline.evidence(fake, ranked, 2)] == want, doc
    off = SimpleNamespace(settings=load_settings(distinct_pages=False), library=lib)
    same_page = [on(1, "long", 7), on(2, "long", 7)]
    assert [c.chunk.chunk_id for c in Pipeline.evidence(off, same_page, 2)] == ["long:1", "long:2"]
