"""pipeline.answering.flag in the libraries people build: one real leaflet, with the real models."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.answering.flag import flag_features, is_content, rarity
from pipeline.qa import Pipeline
from pipeline.settings import load_settings
from pipeline.types import Question

ROOT = Path(__file__).resolve().parents[1]
LEAFLETS = ROOT.parent / "shared" / "unlp" / "pdfs"
RETABOLIL = LEAFLETS / "4e779acee13fa6e0763fb33d1c83030b8e6ea33d.pdf"  # its «Дорослим:» is italic in Markdown
QUESTION = Question("0", "Як рекомендовано приймати ретаболіл дорослим?",
                    ["внутрішньо", "підшкірно", "орально", "внутрішньовенно", "внутрішньом’язово", "інгаляційно"],
                    "E", RETABOLIL.name, 1)
BEFORE = "a97bb4a"  # main before the tokenizer and the flag of issue 49

needs_leaflets = pytest.mark.skipif(not RETABOLIL.exists(), reason="no ../shared/unlp")


@pytest.fixture(scope="module")
def one_leaflet(tmp_path_factory, models):
    pipe = Pipeline(load_settings(), root=tmp_path_factory.mktemp("one"), models=models)
    pipe.add_pdf(RETABOLIL.read_bytes(), RETABOLIL.name)
    return pipe


def test_rarity_comes_from_the_language_not_the_library():
    assert rarity("має") < rarity("рекомендовано") < rarity("ретаболіл") == 8.0


def test_only_content_words_count_ordinary_wording_never_does():
    """Issue 55: the fires named a common word the leaflet happened not to use. Names, terms, numbers and nouns
    that name a thing are content words; verbs, adverbs, common adjectives, action nouns and the most frequent
    nouns are the question's wording (decided from the language's frequencies and parts of speech)."""
    ordinary = ["дозволено", "статися", "вживання", "одночасне", "безпечно", "компанія", "виникати", "рекомендовано",
                "приймати", "слід", "побічні", "років"]
    content = ["ретаболіл", "фервексу", "глібенкламіду", "парацетамолу", "отологічного", "неускладнених",
               "передозуванні", "музею", "квиток", "таблеток", "мг", "Fructis", "B12", "2,5"]
    assert [w for w in ordinary if is_content(w)] == []
    assert [w for w in content if not is_content(w)] == []


class _Library:
    """What flag_features reads of a library: its document frequencies and a document's terms (one document)."""

    def __init__(self, text):
        from pipeline.text import content_terms

        self.terms = content_terms(text)

    def doc_freq(self):
        return {t: 1 for t in self.terms}, 1

    def doc_terms(self, doc_hash):
        return frozenset(self.terms)


def _one_chunk(text):
    from pipeline.types import Candidate, Chunk

    return Candidate(Chunk("c0", "h", "leaflet.pdf", 0, "", text, "", [(1, 0, len(text))]))


def test_an_ordinary_word_no_document_holds_neither_is_named_nor_weighs():
    """A question worded with a verb and an ordinary noun the leaflet never uses («статися», «вживання»): nothing
    is named absent and every word feature reads as if the question were worded the leaflet's way."""
    page = "Ретаболіл. Передозування: нудота, блювання. При передозуванні слід звернутися до лікаря."
    c, lib = _one_chunk(page), _Library(page)
    asked = flag_features(lib, Question("q", "Що може статися при передозуванні ретаболілу?", []), [c], [c])
    plain = flag_features(lib, Question("q", "Що буває при передозуванні ретаболілу?", []), [c], [c])
    assert asked["absent_words"] == [] and asked["unmatched_words"] == [], asked
    for k in ("q_cov", "q_cov_info", "q_doc1_info", "rare_cov", "rare_doc1", "rare_absent"):
        assert asked[k] == plain[k], k
    assert asked["rare_absent"] == 0.0 and asked["q_cov_info"] == 1.0
    # a content word no document holds still counts, and is named
    other = flag_features(lib, Question("q", "Що може статися при передозуванні фервексу?", []), [c], [c])
    assert other["absent_words"] == ["фервексу"] and other["rare_absent"] > 0 and other["q_cov_info"] < 1.0
    # a question of ordinary words only has nothing missing
    bare = flag_features(lib, Question("q", "Чи безпечно це вживати одночасно?", []), [c], [c])
    assert bare["absent_words"] == [] and bare["q_cov_info"] == 1.0 and bare["rare_absent"] == 0.0


@needs_leaflets
def test_a_one_leaflet_library_answers_its_own_question(one_leaflet):
    """The demo's first question: the visitor's one leaflet holds the answer, so no "not found"."""
    a = one_leaflet.ask(QUESTION)
    assert a.details.get("not_in_documents") is False, a.details.get("flag_features")
    assert a.details["flag_basis"] == "dense+lexical" and a.letter == "E", a.probabilities
    assert a.doc_name == RETABOLIL.name and a.page == 1


@needs_leaflets
def test_an_italic_word_is_found_by_bm25_and_never_named_absent(one_leaflet):
    lib = one_leaflet.library
    italic = [c for d in lib.documents() for c in lib.chunks_of(d.doc_hash) if "_Дорослим" in c.body]
    assert italic, "the leaflet's Markdown no longer writes «Дорослим:» in italics: pick another word"
    scores = lib.lexical_scores("дорослим")
    assert scores[italic[0].chunk_id] > 0
    q = Question("q", "Яку дозу рекомендовано дорослим і жінкам, які приймають ретаболіл?", [])
    reranked = list(one_leaflet.search(q).reranked)
    feats = flag_features(lib, q, reranked, one_leaflet.evidence(reranked, 2))
    assert "дорослим" not in feats["absent_words"] and "ретаболіл" not in feats["absent_words"], feats


@needs_leaflets
def test_a_question_about_another_medicine_is_not_found_in_this_document(one_leaflet):
    q = Question("absent", "Яку максимальну добову дозу парацетамолу містить Фервекс для дорослих?",
                 ["1 г", "2 г", "3 г", "4 г", "5 г", "6 г"])
    reranked = list(one_leaflet.search(q).reranked)
    feats = flag_features(one_leaflet.library, q, reranked, one_leaflet.evidence(reranked, 2))
    assert "фервекс" in feats["absent_words"] and "парацетамолу" in feats["absent_words"], feats
    assert feats["absent_words"][0] in ("фервекс", "парацетамолу")  # rarest first; common words never named
    assert "дорослих" not in feats["absent_words"], feats  # the leaflet says «дорослим»: a form of it


@needs_leaflets
def test_a_library_indexed_before_the_tokenizer_change_answers_the_same_after_it(tmp_path, one_leaflet, models):
    """The lexical index is never stored: it is built from the stored chunk text when a library opens. So a
    library indexed by the code before issue 49 (run here from ``git archive``) searches, flags and answers
    exactly as one indexed now."""
    old = tmp_path / "old"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE, "pipeline"], capture_output=True)
    if archive.returncode:
        pytest.skip(f"commit {BEFORE} is not in this clone: {archive.stderr.decode()[:200]}")
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    lib_dir = tmp_path / "library"
    code = ("import sys; from pathlib import Path; from pipeline.qa import Pipeline; "
            "from pipeline.settings import load_settings; "
            f"p = Pipeline(load_settings(), root=Path({str(lib_dir)!r})); "
            f"p.add_pdf(Path({str(RETABOLIL)!r}).read_bytes(), {RETABOLIL.name!r}); p.library.close()")
    subprocess.run([sys.executable, "-c", code], cwd=old, check=True, timeout=600,
                   env={**os.environ, "PYTHONPATH": str(old)})
    reopened = Pipeline(load_settings(), root=lib_dir, models=models)
    try:
        before, now = reopened.ask(QUESTION), one_leaflet.ask(QUESTION)
        assert [c.chunk.chunk_id for c in before.candidates] == [c.chunk.chunk_id for c in now.candidates]
        assert (before.letter, before.page, before.details["not_in_documents"]) == \
            (now.letter, now.page, now.details["not_in_documents"])
        assert before.probabilities == pytest.approx(now.probabilities, abs=1e-6)
    finally:
        reopened.library.close()
        shutil.rmtree(lib_dir, ignore_errors=True)
