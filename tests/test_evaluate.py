import time
from pathlib import Path

import pytest

from pipeline.errors import QuestionsError
from pipeline.evaluation.metric import metrics, page_proximity
from pipeline.evaluation.questions import read_questions
from pipeline.settings import load_settings

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
    assert m["page@1"] == pytest.approx(1 / 4)  # exact page in the right document: only the first row
    assert m["score"] == pytest.approx((1.0 + 0.45 + 0.5 + 0.0) / 4)


def test_calibration_hand_computed():
    from pipeline.evaluation.metric import calibration

    c = calibration([({"A": 0.9, "B": 0.1}, "A", "A"),  # right at 0.9: off by 0.1, half the questions
                     ({"A": 0.4, "B": 0.6}, "B", "A"),  # wrong at 0.6: off by 0.6
                     ({}, "", "A"),  # failed: no probabilities, not counted
                     ({"A": 1.0}, "A", "")])  # no gold answer, not counted
    assert c["calibration_n"] == 2 and c["mean_confidence"] == pytest.approx(0.75)
    assert c["answered_accuracy"] == pytest.approx(0.5)
    assert c["ece"] == pytest.approx(0.5 * 0.1 + 0.5 * 0.6)
    assert 0 < c["ece_chance"] < 1 and 0 <= c["ece_p"] <= 1
    assert calibration([({}, "", "A")]) == {}


def test_page_proximity_edges():
    assert page_proximity("a", 1, "a", 1, 1) == 1.0
    assert page_proximity("a", 10, "a", 1, 10) == pytest.approx(0.1)
    assert page_proximity("a", 50, "a", 1, 10) == 0.0  # never negative
    assert page_proximity("b", 1, "a", 1, 10) == 0.0
    assert page_proximity("a", None, "a", 1, 10) == 0.0
    assert page_proximity("a", 1, "a", None, 10) == 0.0  # gold without a page


UKR = "7,domain_1,5,Що таке «X»? Ґанок і їжак,один,два,три,чотири,п’ять,шість,C,doc.pdf,4\n"


def test_read_questions_competition_format_in_every_encoding():
    text = HEADER + UKR
    for data in (text.encode(), text.encode("utf-8-sig"), text.replace("’", "'").encode("cp1251"),
                 text.encode("utf-16"), text.replace("\n", "\r\n").encode()):
        qs, problems = read_questions(data)
        assert problems == []
        (q,) = qs
        assert (q.qid, q.text, q.options[2], q.gold_answer, q.gold_doc, q.gold_page) == \
            ("7", "Що таке «X»? Ґанок і їжак", "три", "C", "doc.pdf", 4)


def test_read_questions_the_shared_dev_set():
    f = Path(__file__).resolve().parents[2] / "shared" / "unlp" / "questions.csv"
    if not f.exists():
        pytest.skip("no ../shared/unlp")
    qs, problems = read_questions(f.read_bytes())
    assert len(qs) == 170 and problems == [] and all(q.gold_answer and q.gold_doc and q.gold_page for q in qs)


def test_read_questions_without_gold_columns_and_bad_rows():
    text = ("Question_ID,Question,A,B,C,D,E,F\n"
            "1,Питання?,a,b,c,d,e,f\n"
            "2,,a,b,c,d,e,f\n"  # empty question
            "3,Лише один варіант?,a,,,,,\n"  # one option
            ",Без номера?,a,b,c,d,e,f\n"  # no id
            "\n"  # a blank line: ignored
            "1,Той самий номер?,a,b,c,d,e,f\n"  # duplicate id
            "5,Два варіанти?,a,,b,,,\n")  # empty options stay empty strings
    qs, problems = read_questions(text.encode())
    assert [q.qid for q in qs] == ["1", "5"] and qs[0].gold_answer is None and qs[0].gold_doc is None
    assert qs[1].options == ["a", "", "b", "", "", ""]
    assert problems == ["line 3 (Question_ID 2): the question is empty — skipped",
                        "line 4 (Question_ID 3): fewer than two non-empty options — skipped",
                        "line 5: no Question_ID — skipped",
                        "line 7 (Question_ID 1): this Question_ID is already used on line 2 — skipped"]


def test_none_of_the_documents_is_read_and_scored_as_not_found(tmp_path):
    """Issue 55: Correct_Answer "none" (a six-option question judged "not in these documents", its options kept)
    is read with no document or page, and a run scores it right — answer, document and page — only when its
    not-in-documents flag fired; the letter it leaned to does not count, nor is it a gold page to recall."""
    import json
    from types import SimpleNamespace

    from pipeline.evaluation.questions import NONE
    from pipeline.evaluation.run import evaluate
    from pipeline.settings import load_settings
    from pipeline.types import Answer, Search

    text = ("Question_ID,Question,A,B,C,D,E,F,Correct_Answer,Doc_ID,Page_Num\n"
            "n1,Скільки коштує доба?,50,100,,,,,none,parking.pdf,2\n"  # "none": a document given is dropped
            "n2,А тиждень?,50,100,,,,,NONE,,\n"
            "a1,Котра година?,9,10,,,,,B,muzei.pdf,1\n")
    qs, problems = read_questions(text.encode())
    assert problems == [] and [(q.qid, q.options[:2], q.gold_answer, q.gold_doc, q.gold_page) for q in qs] == [
        ("n1", ["50", "100"], NONE, None, None), ("n2", ["50", "100"], NONE, None, None),
        ("a1", ["9", "10"], "B", "muzei.pdf", 1)]
    flagged = {"n1": True, "n2": False, "a1": False}  # n1: "not found" (right); n2: answered a letter (wrong)

    class Pipe:
        settings = load_settings(data_dir=tmp_path)
        library = SimpleNamespace(documents=lambda: [SimpleNamespace(name="muzei.pdf", n_pages=1)])

        def ask(self, q, on_stage=None, **kw):
            on_stage("search", Search(q, (), (), {}, ()))
            return Answer("B", {"A": 0.2, "B": 0.8}, "muzei.pdf", "h", 1, [], [], {},
                          {"letter": {}, "option": {}, "prompt_tokens": 1, "retried": False,
                           "not_in_documents": flagged[q.qid]})

    m, traces = evaluate(Pipe(), qs, tmp_path / "out")
    assert m["n"] == 3 and m["answer_accuracy"] == pytest.approx(2 / 3) and m["doc_accuracy"] == pytest.approx(2 / 3)
    assert m["page_proximity"] == pytest.approx(2 / 3) and m["score"] == pytest.approx(2 / 3)
    assert m["recall@1_retrieval"] == 0.0  # of a1 alone (its page not retrieved here), not of n1 and n2
    assert [t["gold"]["answer"] for t in traces] == [NONE, NONE, "B"] and "gold_rank" not in traces[0]
    assert m["calibration_n"] == 3 and m["answered_accuracy"] == pytest.approx(1 / 3)  # B is right for a1 only
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["score"] == pytest.approx(2 / 3)


def test_read_questions_columns_missing_extra_reordered_seventh_option():
    with pytest.raises(QuestionsError,
                       match=r"lacks the column\(s\) C, D, E, F \(found: Question_ID, Question, A, B\)"):
        read_questions(b"Question_ID,Question,A,B\n1,q,a,b\n")
    with pytest.raises(QuestionsError, match=r"lacks the column\(s\) Question \(found: Question_ID, Text, A, "):
        read_questions(b"Question_ID,Text,A,B,C,D,E,F\n1,q,a,b,c,d,e,f\n")
    # any order and case, extra columns ignored, a seventh option column noted once
    text = ("f,e,Notes,question,d,c,b,a,question_id,G\n"
            "6,5,x,Що?,4,3,2,1,q1,7\n"
            "6,5,x,Що ще?,4,3,2,1,q2,7\n")
    qs, problems = read_questions(text.encode())
    assert [q.options for q in qs] == [list("123456")] * 2 and qs[1].text == "Що ще?"
    assert problems == ["column(s) G ignored: a question has six options, A–F"]


def test_read_questions_semicolon_and_tab_separated():
    for sep in (";", "\t"):
        text = HEADER.replace(",", sep) + UKR.replace(",", sep)
        (q,), problems = read_questions(text.encode("cp1251", errors="replace"))
        assert q.text == "Що таке «X»? Ґанок і їжак" and q.options[5] == "шість" and q.gold_page == 4
    # a comma inside a semicolon-separated cell stays in the cell
    (q,), _ = read_questions("Question_ID;Question;A;B;C;D;E;F\n1;Так, чи ні?;так;ні;;;;\n".encode())
    assert q.text == "Так, чи ні?"


def test_read_questions_unusable_files_are_clear_errors():
    cases = {
        b"": "the questions file is empty",
        b"\xef\xbb\xbf  \r\n": "the questions file is empty",
        HEADER.encode(): "has a header but no questions",
        (HEADER + "1,d,5,,a,b,c,d,e,f,A,x.pdf,1\n").encode():
            r"no usable question: line 2 \(Question_ID 1\): the question",
        bytes(range(256)) * 40: "not text",
        b"PK\x03\x04" + bytes(500): "Excel .xlsx",
        b"%PDF-1.7\n" + bytes(100): "not CSV text but a PDF",
        "Питання: що таке X?\nВідповідь: ніщо\n".encode(): r"lacks the column\(s\) Question_ID, Question, A, ",
        (HEADER + '1,d,5,"' + "x" * 200_000 + "\n").encode(): "not valid CSV at line",
    }
    for data, message in cases.items():
        with pytest.raises(QuestionsError, match=message):
            read_questions(data)


def test_read_questions_long_cells_bad_gold_and_mostly_utf8():
    long = "Д" * 6000
    text = HEADER + f"1,d,5,{long},{long},b,c,d,e,f,a,doc.pdf,4.0\n2,d,5,Q?,a,b,c,d,e,f,Z,doc.pdf,n/a\n"
    (q1, q2), problems = read_questions(text.encode().replace(b"n/a", b"\xff"))  # one stray byte
    assert len(q1.text) == len(q1.options[0]) == 5000 and q1.gold_answer == "A" and q1.gold_page == 4
    assert q2.gold_answer is None and q2.gold_page is None
    assert problems == ["1 byte(s) that are not UTF-8 were replaced by \ufffd",
                        "line 2 (Question_ID 1): Question, A cut to 5000 characters"]
    many = HEADER + "".join(f"{i},d,5,,a,b,c,d,e,f,A,x.pdf,1\n" for i in range(100)) + UKR
    qs, problems = read_questions(many.encode())
    assert len(qs) == 1 and len(problems) == 51 and problems[-1] == "… and 50 more"


def test_read_questions_100000_rows_fast_and_the_run_limit():
    rows = "".join(f"{i},d,5,Питання {i} про щось?,варіант а,варіант б,в,г,ґ,д,C,doc{i % 30}.pdf,{i % 7 + 1}\n"
                   for i in range(100_000))
    data = (HEADER + rows).encode()
    t0 = time.perf_counter()
    qs, problems = read_questions(data)
    took = time.perf_counter() - t0
    assert len(qs) == 100_000 and problems == [] and qs[-1].qid == "99999"
    assert took < 10, took  # about 1 s on 2 busy cores
    with pytest.raises(QuestionsError, match=r"has 100,000 questions, more than the 5,000 allowed in one run.*"
                                             r"PDFQA_MAX_QUESTIONS"):
        read_questions(data, max_questions=load_settings().limits.max_questions)
    assert len(read_questions(data[: data.index(b"\n5000,")], max_questions=5000)[0]) == 5000


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
    assert m["ece"] == pytest.approx(1 - m["mean_confidence"])  # one question, answered right
    (trace,) = [json.loads(line) for line in open(out / "trace.jsonl", encoding="utf-8")]
    assert trace["gold_rank"]["rerank"] >= 1 and set(trace["probabilities"]) == set("ABCDEF")
    assert all({"dense", "lexical", "fused", "rerank"} <= set(c["scores"]) for c in trace["candidates"])


def test_a_question_over_the_length_limit_fails_at_once_in_a_batch():
    """The batch checks each question before any model work (item 11): a clear failure, not minutes of work."""
    from types import SimpleNamespace

    from pipeline.errors import QuestionError
    from pipeline.evaluation.run import _predict
    from pipeline.types import Question

    s = load_settings()
    pipe = SimpleNamespace(settings=s)  # no models: the check must come first
    q = Question("q", "Що? " * 1800, ["a", "b", "", "", "", ""])
    with pytest.raises(QuestionError, match="over the limit"):
        _predict(pipe, q, {"Question_ID": "q"}, True)


def test_batch_command_routes_a_free_form_csv(tmp_path, models, manual_pdf, monkeypatch, capsys):
    """A questions CSV without option columns goes to the free-form path (``pipeline.evaluation.free``)."""
    import csv
    import json

    import pymupdf

    from pipeline import evaluate as ev
    from pipeline import qa

    pdfs = tmp_path / "pdfs"
    pdfs.mkdir()
    (pdfs / "manual.pdf").write_bytes(manual_pdf)
    doc = pymupdf.open(stream=manual_pdf, filetype="pdf")
    gold = [i + 1 for i in range(doc.page_count) if "строком 36 місяців" in " ".join(doc[i].get_text().split())][0]
    qcsv = tmp_path / "free.csv"
    qcsv.write_text("Question_ID;Question;Answer;Doc_ID;Page_Num\n"
                    f"f1;Яким є строк гарантії на зволожувач «Росинка-7»?;36 місяців;manual.pdf;{gold}\n", encoding="utf-8")
    args = ["--pdfs", str(pdfs), "--questions", str(qcsv), "--out", str(tmp_path / "out"), "--data-dir",
            str(tmp_path / "lib")]
    assert ev.main([*args, "--no-answer"]) == 2 and "--no-answer is for six-option questions" in capsys.readouterr().err
    monkeypatch.setattr(qa, "Models", lambda settings: models)  # reuse the already loaded real models
    assert ev.main(args) == 0
    rows = list(csv.DictReader(open(tmp_path / "out" / "submission.csv", encoding="utf-8")))
    assert list(rows[0]) == ["Question_ID", "Answer", "Doc_ID", "Page_Num"] and "36" in rows[0]["Answer"]
    m = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert m["n_questions"] == 1 and m["failed"] == 0 and m["f1"] >= 0.5 and m["doc_accuracy"] == 1.0
    assert m["indexing"]["pdfs"] == 1 and m["settings"]["free"]["free_mode"] == "generate"
