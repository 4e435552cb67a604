import pytest

from pipeline.evaluate import QuestionsError, metrics, page_proximity, read_questions

HEADER = "Question_ID,Domain,N_Pages,Question,A,B,C,D,E,F,Correct_Answer,Doc_ID,Page_Num\n"


def row(**kw):
    base = dict(pred_answer="A", gold_answer="A", pred_doc="d.pdf", gold_doc="d.pdf", pred_page=3, gold_page=3,
                gold_n_pages=10)
    base.update(kw)
    return base


def test_metric_hand_computed():
    rows = [
        row(),  # all right: 0.5 + 0.25 + 0.25
        row(pred_answer="B", pred_page=5),  # wrong answer, page off by 2 of 10: 0 + 0.25 + 0.25*0.8
        row(pred_doc="x.pdf"),  # wrong doc: page term 0 too: 0.5 + 0 + 0
        row(pred_answer="C", pred_doc="x.pdf", pred_page=None),  # nothing right
    ]
    m = metrics(rows)
    assert m["answer_accuracy"] == pytest.approx(2 / 4)
    assert m["doc_accuracy"] == pytest.approx(2 / 4)
    assert m["page_proximity"] == pytest.approx((1 + 0.8) / 4)
    assert m["score"] == pytest.approx((1.0 + 0.45 + 0.5 + 0.0) / 4)


def test_page_proximity_edges():
    assert page_proximity("a", 1, "a", 1, 1) == 1.0
    assert page_proximity("a", 10, "a", 1, 10) == pytest.approx(0.1)
    assert page_proximity("a", 50, "a", 1, 10) == 0.0  # never negative
    assert page_proximity("b", 1, "a", 1, 10) == 0.0
    assert page_proximity("a", None, "a", 1, 10) == 0.0


def test_read_questions_competition_format_with_bom_and_cp1251():
    text = HEADER + "7,domain_1,5,Що таке X?,один,два,три,чотири,п’ять,шість,C,doc.pdf,4\n"
    for data in (text.encode("utf-8-sig"), text.replace("’", "'").encode("cp1251")):
        qs, problems = read_questions(data)
        assert problems == []
        (q,) = qs
        assert (q.qid, q.text, q.options[2], q.gold_answer, q.gold_doc, q.gold_page) == \
            ("7", "Що таке X?", "три", "C", "doc.pdf", 4)


def test_read_questions_without_gold_columns_and_bad_rows():
    text = ("Question_ID,Question,A,B,C,D,E,F\n"
            "1,Питання?,a,b,c,d,e,f\n"
            "2,,a,b,c,d,e,f\n"  # empty question
            "3,Лише один варіант?,a,,,,,\n")
    qs, problems = read_questions(text.encode())
    assert [q.qid for q in qs] == ["1"] and qs[0].gold_answer is None
    assert len(problems) == 2 and "line 3" in problems[0] and "line 4" in problems[1]


def test_read_questions_missing_column_is_a_clear_error():
    with pytest.raises(QuestionsError, match="lacks the column"):
        read_questions(b"Question_ID,Question,A,B\n1,q,a,b\n")
