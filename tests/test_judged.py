"""A library's judged questions (issue 45): kept, replaced, removed, isolated per visitor, exported in the formats
``python -m pipeline.evaluate`` reads, imported back, and run without a document that is gone."""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from pipeline.errors import QuestionsError
from pipeline.evaluation import judged as J
from pipeline.evaluation.free import is_free_form, read_free_questions
from pipeline.evaluation.judged import JudgedError, JudgedQuestions, Shown
from pipeline.evaluation.questions import read_questions

SAMPLE = Path(__file__).resolve().parents[1] / "assets" / "sample"
OPTS = ["7 днів", "14 днів", "21 день", "30 днів", "", ""]
T0 = 1_796_600_000.0  # 2026-12-07


def shown(letter="B", doc="rules.pdf", page=2, not_found=False) -> Shown:
    return Shown(letter, doc, page, 0.61, not_found, J.now_iso(T0))


def test_judge_list_update_and_remove(tmp_path):
    j = JudgedQuestions(tmp_path / "judged.json")
    a = j.judge("Який строк користування?", OPTS, "right", shown=shown(), now=T0)
    assert a.replaced is None and a.record.qid == "J001" and "Saved as J001" in a.message
    assert (a.record.answer, a.record.doc, a.record.page) == ("B", "rules.pdf", 2)  # preset to what was shown
    b = j.judge("Скільки коштує квиток?", [], "wrong", shown=Shown("5 гривень", "rules.pdf", 1, None, False, ""),
                answer="25 гривень", page=3, error_kind=J.WRONG_ANSWER, note="таблиця на с. 3", now=T0 + 60)
    assert (b.record.qid, b.record.options, b.record.page, b.record.note) == ("J002", (), 3, "таблиця на с. 3")
    assert [r.qid for r in j.list()] == ["J002", "J001"]  # newest first
    # the same question again (another tab; case and spacing aside): one record, the last judgement, said so
    again = j.judge("  який строк   користування? ", OPTS[:4], "wrong", shown=shown(), answer="c", page=1,
                    now=T0 + 120)
    assert again.replaced == a.record and again.record.qid == "J001" and again.record.answer == "C"
    assert "judged before (right" in again.message and "replaced" in again.message
    assert len(j) == 2 and [r.qid for r in j.list()] == ["J001", "J002"]
    assert j.find("Який строк користування?", OPTS).answer == "C" and j.find("Який строк?", OPTS) is None
    assert j.remove("J002").qid == "J002" and j.remove("J002") is None and [r.qid for r in j.list()] == ["J001"]
    assert j.judge("Нове?", ["x", "y"], "right", shown=shown("A"), now=T0).record.qid == "J002"  # ids never reused
    assert j.judged_after(T0 + 60) == ["J001"]  # judged again after a run that began then: that run's gold is older


def test_two_tabs_judging_at_once_lose_nothing_and_one_question_stays_one_record(tmp_path):
    """Two tabs of one visitor (two instances over one file, their calls in threads at once): every distinct
    question is kept, each once; the same question judged by both is one record, the other told it replaced one."""
    import threading

    tabs = [JudgedQuestions(tmp_path / "judged.json"), JudgedQuestions(tmp_path / "judged.json")]
    saved, start = [[], []], threading.Barrier(2)

    def judge(i):
        start.wait()
        for n in range(20):
            saved[i].append(tabs[i].judge(f"Питання {i}-{n}?", OPTS, "right", shown=shown(), now=T0 + n))
        saved[i].append(tabs[i].judge("Спільне питання?", OPTS, "wrong", shown=shown(), answer="CD"[i], now=T0 + 99))

    threads = [threading.Thread(target=judge, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = JudgedQuestions(tmp_path / "judged.json").list()
    assert len(got) == 41 and len({r.qid for r in got}) == 41
    shared = [r for r in got if r.question == "Спільне питання?"]
    assert len(shared) == 1 and shared[0].answer in ("C", "D")
    last = [s[-1] for s in saved]
    assert sum(x.replaced is not None for x in last) == 1 and any("replaced" in x.message for x in last)


def test_what_a_judgement_must_say(tmp_path):
    j = JudgedQuestions(tmp_path / "judged.json")
    refused = [
        (dict(verdict="wrong", shown=shown("B"), answer="B"), "judge it right"),
        (dict(verdict="wrong", shown=shown("B")), "needs the right answer"),
        (dict(verdict="right"), "needs the answer that was shown"),
        (dict(verdict="right", shown=shown("B"), answer="C"), "not the one shown"),
        (dict(verdict="wrong", shown=shown("B"), answer="E"), "option E is empty"),
        (dict(verdict="wrong", shown=shown("B"), answer="G"), "a letter A–F"),
        (dict(verdict="maybe", shown=shown()), "“right” or “wrong”"),
        (dict(verdict="wrong", shown=shown(doc=None), answer="A"), "name the document"),
        (dict(verdict="wrong", shown=shown(), answer="A", page=0), "whole number from 1"),
        (dict(verdict="right", shown=shown(), error_kind="typo"), "unknown kind of error"),
    ]
    for kw, said in refused:
        with pytest.raises(JudgedError, match=said):
            j.judge("Який строк?", OPTS, kw.pop("verdict"), **kw)
    with pytest.raises(JudgedError, match="at least two"):
        j.judge("Який строк?", ["лише одна"], "right", shown=shown())
    assert not (tmp_path / "judged.json").exists()  # nothing refused was kept
    # shown "not found", and right: not in these documents (no document, no page); the app's pick may be the answer
    r = j.judge("Який строк?", OPTS, "right", shown=shown(not_found=True)).record
    assert (r.not_in_documents, r.answer, r.doc, r.page, r.free, r.right_answer) == \
        (True, "", None, None, False, J.NOT_IN_DOCUMENTS)  # issue 55: a six-option question keeps its options
    r = j.judge("Який строк?", OPTS, "wrong", shown=shown("B", not_found=True), answer="B").record
    assert (r.not_in_documents, r.answer, r.free) == (False, "B", False)
    # issue 55: the verdict agrees with how a run scores the answer shown. "Not in these documents" of an answer
    # shown as "not found" is right (the app said so), whichever button saved it; "right" of a letter shown
    # cannot make the right answer "not in these documents"
    agreed = j.judge("Який строк?", OPTS, "wrong", shown=shown("B", not_found=True), not_in_documents=True,
                     doc="rules.pdf", page=2)
    r = agreed.record
    assert (r.verdict, r.not_in_documents, r.doc, r.page, r.options) == ("right", True, None, None, tuple(OPTS))
    assert "Judged right" in agreed.message and "The app said “not found”" in agreed.message
    with pytest.raises(JudgedError, match="the app answered «B», not “not in these documents”: judge it wrong"):
        j.judge("Який строк?", OPTS, "right", shown=shown("B"), not_in_documents=True)
    r = j.judge("Який строк?", OPTS, "wrong", shown=shown("B"), not_in_documents=True, doc="rules.pdf").record
    assert (r.verdict, r.not_in_documents, r.doc, r.page) == ("wrong", True, None, None)  # no document, no page


def test_a_restart_keeps_everything_and_a_failed_write_loses_nothing(tmp_path, monkeypatch):
    path = tmp_path / "s" / "judged.json"
    j = JudgedQuestions(path)
    j.judge("Який строк?", OPTS, "right", shown=shown(), error_kind=J.WRONG_PAGE, note="н", now=T0)
    j.judge("Що це?", [], "wrong", shown=Shown("", "rules.pdf", 1, None, True, ""), answer="правила", now=T0 + 1)
    before = j.list()
    assert JudgedQuestions(path).list() == before  # a new process's store (a restart) reads the same
    saved = path.read_bytes()

    def crash(*a):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)  # the write dies where a crash would hurt most: before the rename
    with pytest.raises(OSError):
        j.judge("Третє?", OPTS, "right", shown=shown())
    assert path.read_bytes() == saved and list(path.parent.iterdir()) == [path]  # the old file whole, no leftovers
    monkeypatch.undo()
    path.write_text("{not json")
    with pytest.raises(JudgedError, match="cannot be read.*nothing was changed"):
        JudgedQuestions(path).judge("Третє?", OPTS, "right", shown=shown())
    assert path.read_text() == "{not json"  # a damaged file is never overwritten
    path.write_text('{"questions": [{"qid": "J001"}]}')
    with pytest.raises(JudgedError, match="cannot be read"):
        JudgedQuestions(path).list()


def test_two_visitors_judgements_never_mix(tmp_path):
    from webapp.judged import judged
    from webapp.sessions import SessionStore

    store = SessionStore(tmp_path, opener=lambda root: None, secret="s")
    one, two = store.new_id(), store.new_id()
    judged(store, one).judge("Який строк?", OPTS, "right", shown=shown(), now=T0)
    judged(store, two).judge("Що це?", [], "right", shown=Shown("правила", "b.pdf", 1, None, False, ""), now=T0)
    judged(store, two).judge("Який строк?", OPTS, "wrong", shown=shown(), answer="A", now=T0)
    assert [(r.qid, r.answer) for r in judged(store, one).list()] == [("J001", "B")]
    assert [(r.qid, r.answer) for r in judged(store, two).list()] == [("J002", "A"), ("J001", "правила")]
    assert (judged(store, one).path.parent, judged(store, two).path.parent) == \
        (store.session_dir(one), store.session_dir(two))  # beside each visitor's library and runs
    for bad in ("../" + one, one.upper(), ""):
        with pytest.raises(ValueError):
            judged(store, bad)
    shared = SessionStore(tmp_path / "shared", opener=lambda root: None, shared=True)
    judged(shared, one).judge("Який строк?", OPTS, "right", shown=shown())
    assert len(judged(shared, two)) == 1  # --shared-library: one library, one set, for everyone


def test_a_removed_document_leaves_its_questions_out_with_the_reason(tmp_path):
    j = JudgedQuestions(tmp_path / "judged.json")
    j.judge("Який строк?", OPTS, "right", shown=shown(doc="rules.pdf"), now=T0)
    j.judge("Яка ціна?", ["1", "2"], "wrong", shown=shown("A", doc="rules.pdf"), answer="B", doc="price.pdf", now=T0)
    j.judge("Що це?", [], "wrong", shown=Shown("x", "rules.pdf", 1, None, False, ""), not_in_documents=True)
    qs, left = j.as_questions(["rules.pdf"])
    assert [q.qid for q in qs] == ["J001"] and (qs[0].gold_answer, qs[0].gold_doc, qs[0].gold_page) == ("B", "rules.pdf", 2)
    assert left == ["J002: document price.pdf is no longer in the library — left out"]
    assert J.left_out_reason(j.get("J002"), ["rules.pdf"]) == "document price.pdf is no longer in the library"
    free, left = j.as_questions(["rules.pdf"], free=True)
    assert [(q.qid, q.options, q.gold_answer) for q in free] == [("J003", [], "")] and left == []  # needs no document
    assert j.as_questions([]) == ([], ["J001: document rules.pdf is no longer in the library — left out",
                                       "J002: document price.pdf is no longer in the library — left out"])


def test_not_in_these_documents_keeps_a_six_option_questions_options_and_plain_ones_are_free_form(tmp_path):
    """What the command's own readers make of the exports (issue 55): the six-option file is the competition's
    format with gold columns, a question with options judged "not in these documents" in it with its options and
    ``none`` for its answer (no document, no page); the free-form file writes a plain question's right short
    answer in Answer, and an empty Answer, without document or page, for one not in these documents."""
    from pipeline.evaluation.questions import NONE

    j = JudgedQuestions(tmp_path / "judged.json")
    j.judge("Який строк?", OPTS, "wrong", shown=shown("B"), answer="C", page=1, now=T0)
    j.judge("Яка ціна?", OPTS, "wrong", shown=shown("A"), not_in_documents=True, error_kind=J.ANSWERED_UNANSWERABLE,
            now=T0 + 1)
    j.judge("Що це?", [], "right", shown=Shown("правила бібліотеки", "rules.pdf", 1, None, False, ""), now=T0 + 2)
    j.judge("Хто автор?", [], "right", shown=Shown("", "rules.pdf", 3, None, True, ""), now=T0 + 3)
    assert [(r.qid, r.free) for r in sorted(j.list(), key=lambda r: r.qid)] == \
        [("J001", False), ("J002", False), ("J003", True), ("J004", True)]
    six, free = j.export_csv(), j.export_csv(free=True)
    assert not is_free_form(six) and is_free_form(free)
    qs, notes = read_questions(six.encode())
    assert notes == [] and [(q.qid, q.options, q.gold_answer, q.gold_doc, q.gold_page) for q in qs] == [
        ("J001", OPTS, "C", "rules.pdf", 1), ("J002", OPTS, NONE, None, None)]
    qs, notes = read_free_questions(free.encode())
    assert notes == [] and [(q.qid, q.text, q.options, q.gold_answer, q.gold_doc, q.gold_page) for q in qs] == [
        ("J003", "Що це?", [], "правила бібліотеки", "rules.pdf", 1), ("J004", "Хто автор?", [], "", None, None)]
    assert [(q.qid, q.gold_answer) for q in j.as_questions([])[0]] == [("J002", NONE)]  # needs no document
    assert [q.qid for q in j.as_questions(["rules.pdf"], free=True)[0]] == ["J003", "J004"]
    assert j.export_files(tmp_path / "out") == [tmp_path / "out" / J.OPTIONS_CSV, tmp_path / "out" / J.FREE_CSV]
    k = JudgedQuestions(tmp_path / "back.json")  # and back: its options and "not in these documents" kept
    assert k.import_csv(six).added == ["J001", "J002"]
    r = k.get("J002")
    assert (r.options, r.not_in_documents, r.answer, r.doc, r.page, r.free) == (tuple(OPTS), True, "", None, None,
                                                                                 False)


def test_a_six_option_run_scores_none_right_only_as_not_found():
    """The metric (issue 55): a question in none of the documents is right — answer, document and page — when the
    run says "not found", and wrong in all three when it gives a letter; the table, the flips and the reliability
    diagram read it the same way."""
    from pipeline.evaluation import metric as M
    from pipeline.evaluation.questions import NONE
    from webapp import runs as R

    row = lambda flagged: {"pred_answer": "B", "gold_answer": NONE, "pred_doc": "rules.pdf", "gold_doc": None,  # noqa: E731
                           "pred_page": 2, "gold_page": None, "gold_n_pages": 0, "pred_not_found": flagged}
    right, wrong = M.metrics([row(True)]), M.metrics([row(False)])
    assert (right["answer_accuracy"], right["doc_accuracy"], right["page_proximity"], right["score"]) == (1, 1, 1, 1)
    assert (wrong["answer_accuracy"], wrong["doc_accuracy"], wrong["page_proximity"], wrong["score"]) == (0, 0, 0, 0)
    gold = {"answer": NONE, "doc": None, "page": None}
    said = {"Question_ID": "J002", "answer": "B", "probabilities": {"B": 0.9}, "doc": "rules.pdf", "page": 2,
            "gold": gold, "not_in_documents": True}
    answered = {**said, "not_in_documents": False}
    assert M.answer_right(said) is True and M.answer_right(answered) is False
    assert M.error_kinds(said) == [] and M.error_kinds(answered) == [M.WRONG_ANSWER]
    assert [f["change"] for f in M.compare_runs({"metrics": {}, "traces": [answered]},
                                                {"metrics": {}, "traces": [said]})["flips"]] == ["fixed"]
    rows = R.question_rows([said, answered])
    assert [r[2:4] for r in rows] == [["not found (B)", "none (not in these documents)"],
                                      ["B", "none (not in these documents)"]]
    assert [r[8] for r in rows] == ["right", M.WRONG_ANSWER]
    assert R.reliability([said])[0]["right"] == 0  # the option chosen (B, shown at 90%) is not right: none is
    assert R.loss_stage(said) is None  # no gold page to lose


def test_an_export_imports_back_whole_and_bad_rows_are_named(tmp_path):
    j = JudgedQuestions(tmp_path / "a.json")
    j.judge("Який строк?", OPTS, "wrong", shown=shown("B"), answer="C", page=1, error_kind=J.WRONG_ANSWER,
            note="див. п. 2", now=T0)
    j.judge("Що це?", [], "wrong", shown=Shown("x", "rules.pdf", 1, None, False, ""), not_in_documents=True,
            now=T0 + 1)
    k = JudgedQuestions(tmp_path / "b.json")
    assert k.import_csv(j.export_csv().encode("utf-8-sig")).added == ["J001"]
    assert k.import_csv(j.export_csv(free=True)).added == ["J002"]
    fields = lambda r: (r.qid, r.question, r.options, r.verdict, r.answer, r.not_in_documents, r.doc, r.page,  # noqa: E731
                        r.judged_at, r.error_kind, r.note)
    assert [fields(r) for r in k.list()] == [fields(r) for r in j.list()]
    assert all(r.shown is None for r in k.list())  # what the app answered is not in the file
    bad = (j.export_csv().replace("\n", "\nJ001b,Нове?,так,ні,,,,,B,rules.pdf,2,right,,,\n", 1)  # a good row, on line 2
           + "x1,Питання?,так,ні,,,,,D,rules.pdf,2,,,,\n"  # option D empty
           + "x2,Питання два?,так,ні,,,,,,rules.pdf,2,,,,\n"  # no right option
           + "x3,Питання три?,так,ні,,,,,A,,2,,,,\n"  # no document
           + "x4,Питання чотири?,так,ні,,,,,A,rules.pdf,два,,,,\n"  # page not a number
           + "x5,Питання п'ять?,так,,,,,,A,rules.pdf,1,,,,\n"  # one option
           + "J001b,Ще одне?,так,ні,,,,,A,rules.pdf,1,,,,\n"  # the ID again
           + "x6,  який строк? ,7 днів,14 днів,21 день,30 днів,,,A,rules.pdf,1,,,,\n")  # J001's question: updates it
    report = k.import_csv(bad)
    assert report.added == ["J001b"] and report.updated == ["J001", "J001"]
    assert report.problems == [
        "line 4 (Question_ID x1): option D is empty — skipped",
        "line 5 (Question_ID x2): no Correct_Answer (a letter, or “none”: not in these documents) — skipped",
        "line 6 (Question_ID x3): no Doc_ID: a judged question names the document of its right answer — skipped",
        "line 7 (Question_ID x4): the page 'два' is not a number — skipped",
        "line 8 (Question_ID x5): a question with options needs at least two; leave them all empty for a plain "
        "question — skipped",
        "line 9 (Question_ID J001b): this Question_ID is already used on line 2 — skipped"]
    assert k.get("J001").answer == "A" and len(k) == 3  # the good rows kept, the last one for J001 wins
    with pytest.raises(QuestionsError, match="lacks the column.*Answer"):
        k.import_csv("Question_ID,Question\nq,Що?\n")
    with pytest.raises(QuestionsError, match="no usable question"):
        k.import_csv("Question_ID,Question,A,B,C,D,E,F,Correct_Answer,Doc_ID,Page_Num\nq,Що?,a,b,,,,,Z,d.pdf,1\n")
    assert len(k) == 3  # a file with nothing usable changes nothing


def test_the_exported_csv_is_scored_by_the_real_command(tmp_path, models, monkeypatch):
    """Questions of the sample corpus asked with the real models, judged (right; wrong with another option and
    page; wrong with another document), exported, and run through ``python -m pipeline.evaluate``: its score is
    the one the judgements imply for the answers shown (the same pipeline answers the same way)."""
    from pipeline import evaluate as ev
    from pipeline import qa
    from pipeline.evaluation.metric import metrics
    from pipeline.settings import load_settings
    from pipeline.types import Question

    pdfs = tmp_path / "pdfs"
    pdfs.mkdir()
    for p in SAMPLE.glob("*.pdf"):
        shutil.copy(p, pdfs / p.name)
    questions = read_questions((SAMPLE / "questions.csv").read_bytes())[0][:3]
    pipe = qa.Pipeline(load_settings(), root=tmp_path / "lib", models=models)
    for p in sorted(pdfs.iterdir()):
        pipe.add_pdf(p.read_bytes(), p.name)
    pipe.library.wait_indexed()
    n_pages = {d.name: d.n_pages for d in pipe.library.documents()}
    answers = [pipe.ask(Question("ui", q.text, q.options)) for q in questions]  # as the Ask tab asks
    pipe.library.close()
    j = JudgedQuestions(tmp_path / "judged.json")
    s = [J.shown_of(a) for a in answers]
    j.judge(questions[0].text, questions[0].options, "right", shown=s[0])
    other = next(L for L, o in zip("ABCDEF", questions[1].options) if o and L != s[1].answer)
    j.judge(questions[1].text, questions[1].options, "wrong", shown=s[1], answer=other, page=(s[1].page or 1) + 1)
    doc = next(n for n in sorted(n_pages) if n != s[2].doc)
    j.judge(questions[2].text, questions[2].options, "wrong", shown=s[2],
            answer=next(L for L, o in zip("ABCDEF", questions[2].options) if o and L != s[2].answer), doc=doc, page=1)
    (tmp_path / "judged.csv").write_text(j.export_csv(), encoding="utf-8")
    monkeypatch.setattr(qa, "Models", lambda settings: models)  # the command, with the models already loaded
    out = tmp_path / "out"
    assert ev.main(["--pdfs", str(pdfs), "--questions", str(tmp_path / "judged.csv"), "--out", str(out),
                    "--data-dir", str(tmp_path / "lib")]) == 0
    got = json.loads((out / "metrics.json").read_text())
    sub = {r["Question_ID"]: r for r in csv.DictReader(io.StringIO((out / "submission.csv").read_text()))}
    assert [sub[r.qid]["Correct_Answer"] for r in sorted(j.list(), key=lambda r: r.qid)] == [x.answer for x in s]
    want = metrics([{"pred_answer": x.answer, "gold_answer": r.answer, "pred_doc": x.doc, "gold_doc": r.doc,
                     "pred_page": x.page, "gold_page": r.page, "gold_n_pages": n_pages[r.doc]}
                    for x, r in zip(s, sorted(j.list(), key=lambda r: r.qid))])
    assert got["n"] == 3 and want["answer_accuracy"] == pytest.approx(1 / 3)
    for k in ("score", "answer_accuracy", "doc_accuracy", "page_proximity"):
        assert got[k] == pytest.approx(want[k]), k


def test_the_web_apps_glue_downloads_and_the_ready_set(tmp_path):
    """What Evaluate and the downloads get for a visitor (here one without a library on disk: every judged
    question that names a document is left out, saying so; "not in these documents" still runs)."""
    from webapp.files import Files
    from webapp.judged import downloads, judged, ready_set
    from webapp.sessions import SessionStore

    store = SessionStore(tmp_path, opener=lambda root: None, secret="s")
    sid = store.new_id()
    assert ready_set(store, sid) == ([], [], False) and downloads(store, Files(store), sid) == []
    judged(store, sid).judge("Який строк?", OPTS, "right", shown=shown(), now=T0)
    judged(store, sid).judge("Що це?", [], "wrong", shown=Shown("x", "rules.pdf", 1, None, False, ""),
                             not_in_documents=True, now=T0 + 1)
    assert ready_set(store, sid) == ([], ["J001: document rules.pdf is no longer in the library — left out"], False)
    (q,), notes, free = ready_set(store, sid, free=True)
    assert (q.qid, q.gold_answer, notes, free) == ("J002", "", [], True)
    got = [Path(p) for p in downloads(store, Files(store), sid)]
    assert [p.name for p in got] == [J.OPTIONS_CSV, J.FREE_CSV]
    assert all(store.files_dir(sid) in p.parents for p in got)  # among the visitor's files, served to them only
    assert read_questions(got[0].read_bytes())[0][0].gold_answer == "B"


def test_the_judge_row_empties_document_and_page_for_not_in_these_documents(tmp_path):
    """Issue 55 item 7, the Ask tab's row: ticking "not in these documents" empties and locks the right option,
    document and page (left filled, they read as the answer's); unticking gives back those shown. An answer
    shown as "not found" offers "Right: not in these documents" instead of the box."""
    import gradio as gr

    from pipeline.settings import load_settings
    from webapp import judge_row as JR
    from webapp.common import Context
    from webapp.sessions import SessionStore

    with gr.Blocks():
        row = JR.layout()
    seen = {"answer": "B", "doc": "rules.pdf", "page": 2, "probability": 0.6, "not_found": False, "at": ""}
    ticked = JR.on_not_in(row, seen, True)
    assert all(ticked[f]["value"] in (None, "") and ticked[f]["interactive"] is False for f in row.answer_fields)
    back = JR.on_not_in(row, seen, False)
    assert (back[row.doc]["value"], back[row.page]["value"]) == ("rules.pdf", 2) and back[row.doc]["interactive"]
    ctx = Context(load_settings(data_dir=tmp_path), SessionStore(tmp_path, lambda root: None, secret="s"), tmp_path)
    sid = ctx.store.new_id()
    q = ["Який строк?", *OPTS]
    letter = JR.on_shown(ctx, row, sid, q, seen)
    assert letter[row.not_in]["visible"] and letter[row.right_btn]["value"] == "✓ Right"
    none = JR.on_shown(ctx, row, sid, q, {**seen, "not_found": True})
    assert none[row.not_in]["visible"] is False and none[row.right_btn]["value"] == "✓ Right: not in these documents"
    said = JR.on_wrong(ctx, row, sid, q, {**seen, "not_found": True}, None, "", True, "rules.pdf", 2, "", "")[row.msg]
    assert "judged right, the right answer «not in these documents»" in said and "rules.pdf" not in said, said
    r = JudgedQuestions(ctx.store.session_dir(sid) / J.FILE).get("J001")
    assert (r.verdict, r.options, r.doc, r.page) == ("right", tuple(OPTS), None, None)
