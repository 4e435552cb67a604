import pytest

from pipeline.checks import QuestionError, check_question, missing_gold_documents, missing_gold_note
from pipeline.evaluation.questions import read_questions
from pipeline.settings import load_settings

OPTIONS = ["Київ", "Львів", "", "", "", ""]


def test_question_within_the_limits_passes():
    s = load_settings()
    assert s.limits.max_question_chars == 2000
    check_question("Яка столиця України?", OPTIONS, s)
    check_question("x" * 2000, ["a" * 1000, "b"], s)  # exactly at the limits


def test_too_long_question_says_its_length_the_limit_and_the_setting():
    with pytest.raises(QuestionError) as e:
        check_question("питання " * 900, OPTIONS, load_settings())
    assert str(e.value) == ("the question is 7,199 characters, over the limit of 2,000 "
                            "(PDFQA_MAX_QUESTION_CHARS)")


def test_limits_follow_the_environment(monkeypatch):
    monkeypatch.setenv("PDFQA_MAX_QUESTION_CHARS", "50")
    monkeypatch.setenv("PDFQA_MAX_OPTION_CHARS", "10")
    s = load_settings()
    with pytest.raises(QuestionError, match="over the limit of 50 "):
        check_question("q" * 51, OPTIONS, s)
    with pytest.raises(QuestionError, match=r"^option C is 11 characters, over the limit of 10 \(PDFQA_MAX_OPTION"):
        check_question("q", ["a", "b", "c" * 11], s)
    check_question("  " + "q" * 50 + "\n", OPTIONS, s)  # surrounding whitespace is not counted


@pytest.mark.parametrize("question, options, message", [
    ("", OPTIONS, "the question is empty"),
    ("   \n", OPTIONS, "the question is empty"),
    ("Що?", ["лише одна", "", " ", "", "", ""], "at least two options"),
    ("Що?", [None] * 6, "at least two options"),
])
def test_empty_question_or_options(question, options, message):
    with pytest.raises(QuestionError, match=message):
        check_question(question, options, load_settings())


CSV = """Question_ID,Question,A,B,C,D,E,F,Correct_Answer,Doc_ID,Page_Num
1,q1,a,b,c,d,e,f,A,ліки.pdf,1
2,q2,a,b,c,d,e,f,B,b.pdf,2
3,q3,a,b,c,d,e,f,C,ліки.pdf,3
4,q4,a,b,c,d,e,f,D,c.pdf,1
5,q5,a,b,c,d,e,f,E,c.pdf,1
6,q6,a,b,c,d,e,f,F,ліки.pdf,2
7,q7,a,b,c,d,e,f,,,
"""


def test_missing_gold_documents_and_the_questions_they_affect():
    questions, _ = read_questions(CSV)
    assert missing_gold_documents(questions, ["b.pdf", "other.pdf"]) == [("ліки.pdf", 3), ("c.pdf", 2)]
    assert missing_gold_documents(questions, ["ліки.pdf", "b.pdf", "c.pdf"]) == []
    # the library stores safe names: a path or stray spaces in Doc_ID still match
    assert missing_gold_documents(read_questions(CSV.replace("b.pdf", "dir/b.pdf"))[0],
                                  ["b.pdf", "c.pdf", "ліки.pdf"]) == []
    note = missing_gold_note(missing_gold_documents(questions, ["b.pdf"]), len(questions))
    assert note.startswith("2 gold documents are not in the library: ліки.pdf (3), c.pdf (2). "
                           "5 of 7 questions cite them")
    assert missing_gold_note([], 7) == ""
    many = [(f"d{i}.pdf", 1) for i in range(8)]
    assert "d4.pdf (1) and 3 more." in missing_gold_note(many, 8)


def test_no_options_is_a_free_form_question_only_where_allowed():
    s = load_settings()
    check_question("Що таке страховий випадок?", [""] * 6, s, free_ok=True)  # a short answer is asked for
    with pytest.raises(QuestionError, match=r"at least two options \(or none"):
        check_question("Що?", ["лише одна", "", "", "", "", ""], s, free_ok=True)
    with pytest.raises(QuestionError, match="at least two options"):
        check_question("Що таке страховий випадок?", [""] * 6, s)
