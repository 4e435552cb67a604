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


def test_batch_command_end_to_end(tmp_path, models, manual_pdf, pdfgen, monkeypatch):
    """``python -m pipeline.evaluate`` on generated PDFs: files written, bad PDF and bad row reported."""
    import csv
    import json

    from pipeline import evaluate as ev
    from pipeline import qa

    pdfs = tmp_path / "pdfs"
    pdfs.mkdir()
    (pdfs / "manual.pdf").write_bytes(manual_pdf)
    (pdfs / "broken.pdf").write_bytes(pdfgen.corrupt_pdf())
    import pymupdf

    doc = pymupdf.open(stream=manual_pdf, filetype="pdf")
    gold = [i + 1 for i in range(doc.page_count) if "строком 36 місяців" in " ".join(doc[i].get_text().split())][0]
    qcsv = tmp_path / "q.csv"
    qcsv.write_text(HEADER
                    + "w1,x,4,Яким є строк гарантії на зволожувач «Росинка-7»?,12 місяців,24 місяці,6 місяців,"
                      f"36 місяців,48 місяців,гарантії немає,D,manual.pdf,{gold}\n"
                    + "w2,x,4,,a,b,c,d,e,f,A,manual.pdf,1\n", encoding="utf-8")
    monkeypatch.setattr(qa, "Models", lambda settings: models)  # reuse the already loaded real models
    out = tmp_path / "out"
    assert ev.main(["--pdfs", str(pdfs), "--questions", str(qcsv), "--out", str(out),
                    "--data-dir", str(tmp_path / "lib")]) == 0
    rows = list(csv.DictReader(open(out / "submission.csv", encoding="utf-8")))
    assert [r["Question_ID"] for r in rows] == ["w1"]
    assert rows[0]["Correct_Answer"] == "D" and rows[0]["Doc_ID"] == "manual.pdf" and rows[0]["Page_Num"].isdigit()
    m = json.loads((out / "metrics.json").read_text())
    assert m["n"] == 1 and m["doc_accuracy"] == 1.0 and m["answer_accuracy"] == 1.0 and m["page_proximity"] == 1.0
    assert "broken.pdf" in m["indexing"]["failed"] and m["failed"] == 0
    assert {"recall@1_retrieval", "recall@20_rerank", "page_proximity", "score"} <= set(m)
    (trace,) = [json.loads(line) for line in open(out / "trace.jsonl", encoding="utf-8")]
    assert trace["gold_rank"]["rerank"] >= 1 and set(trace["probabilities"]) == set("ABCDEF")
    assert all({"dense", "lexical", "fused", "rerank"} <= set(c["scores"]) for c in trace["candidates"])
