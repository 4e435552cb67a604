"""The long-document generator (bench/longdocs.py) yields the pages it claims, and retrieval finds them."""
from __future__ import annotations

import dataclasses

import pytest

from bench import longdocs


@pytest.fixture(scope="module")
def short_rulebook():
    """A 24-page rulebook of the sport theme, 12 questions (the real set is 100–170 pages)."""
    return longdocs.build_doc("sport", 24, 12, seed=5)


def test_each_answer_is_on_its_gold_page(short_rulebook):
    doc = short_rulebook
    texts = longdocs.page_texts(doc.pdf)
    assert doc.n_pages == len(texts) >= 24
    assert len(doc.questions) == 12
    for q in doc.questions:
        page = texts[q["Page_Num"] - 1]
        assert q["_anchor"] in page and q["_value"] in q["_anchor"], q
        assert sum(q["_anchor"] in t for t in texts) == 1  # the anchor names one page only
        options = [q[L] for L in "ABCDEF"]
        assert len(set(options)) == 6 and q[q["Correct_Answer"]] == q["_value"]
        assert q["Question"] not in page  # paraphrased, not copied


def test_near_identical_pages_and_deterministic(short_rulebook):
    again = longdocs.build_doc("sport", 24, 12, seed=5)
    assert again.pdf == short_rulebook.pdf and again.questions == short_rulebook.questions
    texts = longdocs.page_texts(short_rulebook.pdf)
    articles = sum(t.count("Стаття ") for t in texts)
    assert articles >= 20  # many articles of one template
    # distractors are the same field's values from other articles of the document
    q = next(q for q in short_rulebook.questions if q["_anchor"][0].isdigit())
    wrong = [q[L] for L in "ABCDEF" if L != q["Correct_Answer"]]
    assert sum(any(w in t for t in texts) for w in wrong) >= 3


def test_written_csv_reads_as_competition_format(tmp_path, short_rulebook):
    from pipeline.evaluation.questions import read_questions

    doc = dataclasses.replace(short_rulebook, questions=[dict(q, Question_ID=f"T{i}", Doc_ID=short_rulebook.name)
                                                         for i, q in enumerate(short_rulebook.questions)])
    path = longdocs.write_set([doc], tmp_path)
    questions, problems = read_questions(path.read_bytes())
    assert not problems and len(questions) == 12
    assert all(q.gold_doc == short_rulebook.name and q.gold_page and q.gold_answer for q in questions)
    assert (tmp_path / "pdfs" / short_rulebook.name).read_bytes()[:4] == b"%PDF"


def test_retrieval_finds_the_page_in_a_rulebook(tmp_path, embedder):
    """Pipeline level, real embedder: a 20-page rulebook, questions naming their article in other words."""
    from pipeline.qa import Models, Pipeline
    from pipeline.settings import load_settings
    from pipeline.types import Question

    doc = longdocs.build_doc("grants", 20, 16, seed=3)
    settings = load_settings(page_min_pages=0)  # re-score the page even in this short rulebook
    pipe = Pipeline(settings, root=tmp_path / "lib", models=Models(settings, embedder=embedder))
    pipe.add_pdf(doc.pdf, doc.name)
    asked = [q for q in doc.questions if q["_anchor"][0].isdigit() and "пункт" not in q["Question"]][:4]
    assert len(asked) == 4
    for q in asked:
        question = Question("q", q["Question"], [q[L] for L in "ABCDEF"], q["Correct_Answer"], doc.name, q["Page_Num"])
        reranked = pipe.search(question).reranked
        read = [p for c in reranked[: settings.answer.top_k_answer] for p in c.chunk.pages]  # the passages the model reads
        assert q["Page_Num"] in read, (q["Question"], q["Page_Num"], read)
