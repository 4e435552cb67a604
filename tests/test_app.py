"""Unit tests of the web app's thin logic (no models, no browser)."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.evaluation import metric as M
from webapp import runs as R
from webapp.blocks import BlockError, parse_block
from webapp.sessions import SessionStore, new_session_id, valid_session_id
from webapp.views import failed_text, failure_text, md_escape, plural, stream

OPTS = ["Київ", "Львів", "Одеса", "Харків", "Дніпро", "Суми"]


# ---- block parsing ---------------------------------------------------------------------------
@pytest.mark.parametrize("marks", [
    "ABCDEF",        # Latin
    "АВСDЕF",        # Cyrillic look-alikes А В С Е mixed with Latin D F
    "АБВГДЕ",        # Ukrainian order: А=A Б=B В=C Г=D Д=E Е=F
    "abcdef",
    "абвгде",
])
@pytest.mark.parametrize("sep", [")", ".", ":"])
def test_block_with_every_kind_of_marker(marks, sep):
    text = "Яка столиця України?\n" + "\n".join(f"{m}{sep} {o}" for m, o in zip(marks, OPTS))
    p = parse_block(text)
    assert p.question == "Яка столиця України?"
    assert p.options == OPTS
    assert p.notes == []


def test_ukrainian_order_maps_v_to_c_but_lookalikes_map_v_to_b():
    ukr = parse_block("Q?\nА) a\nБ) b\nВ) c\nГ) d")
    assert ukr.options[:4] == ["a", "b", "c", "d"]
    look = parse_block("Q?\nА) a\nВ) b\nС) c\nD) d")
    assert look.options[:4] == ["a", "b", "c", "d"]


def test_block_multiline_question_and_option_continuations_and_brackets():
    text = """Питання 3: Згідно з правилами,
    скільки днів триває абонемент?

    (A) сім днів
    (B) чотирнадцять
    днів
    (C) двадцять один день
    (D) тридцять
    (E) десять
    (F) двадцять вісім
    Відповідь: C"""
    p = parse_block(text)
    assert p.question == "Згідно з правилами, скільки днів триває абонемент?"
    assert p.options[1] == "чотирнадцять днів"
    assert p.options[5] == "двадцять вісім"  # the answer line is not part of F


def test_block_question_starting_with_a_letter_is_not_an_option():
    p = parse_block("В. Стефаник написав новелу?\nA) так\nB) ні")
    assert p.question == "В. Стефаник написав новелу?"
    assert p.options[:2] == ["так", "ні"]


def test_block_inline_and_missing_options_and_windows_newlines():
    p = parse_block("Що більше? A) 1 B) 2 C) 3")
    assert p.question == "Що більше?" and p.options == ["1", "2", "3", "", "", ""]
    assert p.notes == ["option D is missing", "option E is missing", "option F is missing"]
    p = parse_block("Q?\r\nA) x\r\nB) y\r\n")
    assert p.options[:2] == ["x", "y"]


@pytest.mark.parametrize("text, msg", [
    ("", "empty"),
    ("Just a question with no options", "no options"),
    ("A) x\nB) y", "no question"),
    ("Q?\nA) only one", "fewer than two"),
])
def test_block_errors_are_plain_messages(text, msg):
    with pytest.raises(BlockError, match=msg):
        parse_block(text)


# ---- runs: error kinds, filtering, comparing -----------------------------------------------------
def rec(qid, answer="A", doc="d.pdf", page=1, gold=("A", "d.pdf", 1), error=None):
    r = {"Question_ID": qid, "answer": answer, "doc": doc, "page": page, "seconds": 1.0}
    if gold:
        r["gold"] = {"answer": gold[0], "doc": gold[1], "page": gold[2]}
    if error:
        r = {"Question_ID": qid, "error": error, "seconds": 0.1, **({"gold": r["gold"]} if gold else {})}
    return r


TRACES = [
    rec("1"),                                        # all right
    rec("2", answer="B"),                            # wrong answer
    rec("3", doc="x.pdf", page=4),                   # wrong document (page not counted separately)
    rec("4", page=2),                                # wrong page
    rec("5", answer="C", page=3),                    # wrong answer and wrong page
    rec("6", error="RuntimeError: boom"),            # failed
    rec("7", gold=None),                             # no gold: nothing to be wrong about
]


def test_error_kinds():
    kinds = {t["Question_ID"]: M.error_kinds(t) for t in TRACES}
    assert kinds == {"1": [], "2": ["wrong answer"], "3": ["wrong document"], "4": ["wrong page"],
                     "5": ["wrong answer", "wrong page"], "6": ["failed", "wrong answer", "wrong document"],
                     "7": []}


@pytest.mark.parametrize("kind, ids", [
    ("all", ["1", "2", "3", "4", "5", "6", "7"]),
    ("wrong answer", ["2", "5", "6"]),
    ("wrong document", ["3", "6"]),
    ("wrong page", ["4", "5"]),
    ("failed", ["6"]),
])
def test_filter_by_kind_of_error(kind, ids):
    assert [t["Question_ID"] for t in M.filter_traces(TRACES, kind)] == ids


def test_filter_rejects_unknown_kind_and_counts():
    with pytest.raises(ValueError):
        M.filter_traces(TRACES, "wrong colour")
    assert M.kind_counts(TRACES) == {"all": 7, "wrong answer": 3, "wrong document": 2, "wrong page": 2, "failed": 1,
                                     M.UNSTABLE: 0}


def test_option_order_check_is_a_kind_of_error_and_a_column():
    check = lambda *answers: {"orders": [{"order": "ABCDEF", "answer": a, "probabilities": {}} for a in answers],  # noqa: E731
                              "stable": len(set(answers)) == 1}
    held, moved = rec("1") | {"order_check": check("A", "A", "A")}, rec("2") | {"order_check": check("A", "C", "A")}
    assert M.error_kinds(held) == [] and M.error_kinds(moved) == [M.UNSTABLE]
    assert [t["Question_ID"] for t in M.filter_traces([held, moved, rec("3")], M.UNSTABLE)] == ["2"]
    cells = [r[9] for r in R.question_rows([held, moved, rec("3")])]
    assert cells == ["holds (3)", "changes: A/C", ""]


def test_question_rows_are_plain_values():
    rows = R.question_rows(TRACES, {"2": {"text": "Що?" * 100}})
    assert rows[0][0] == "1" and rows[0][8] == "right"
    assert rows[1][1].endswith("…") and len(rows[1][1]) == 161
    assert rows[5][8] == "failed: RuntimeError: boom"
    assert rows[6][8] == "no gold"
    assert all(isinstance(c, (str, int, float)) for r in rows for c in r)


def run(name, traces, metrics):
    return {"name": name, "traces": traces, "metrics": metrics, "questions": {}}


def test_compare_runs_deltas_and_flips_both_ways():
    a = run("a", [rec("1"), rec("2", answer="B"), rec("3"), rec("4", answer="E")],
            {"score": 0.5, "answer_accuracy": 0.5, "doc_accuracy": 1.0, "page_proximity": 1.0})
    b = run("b", [rec("1", answer="C"), rec("2"), rec("3"), rec("4", answer="F"), rec("9")],
            {"score": 0.6, "answer_accuracy": 0.75, "doc_accuracy": 1.0, "page_proximity": 0.9})
    c = M.compare_runs(a, b)
    deltas = {d["metric"]: d["B − A"] for d in c["deltas"]}
    assert deltas["score"] == pytest.approx(0.1) and deltas["answer_accuracy"] == pytest.approx(0.25)
    assert deltas["doc_accuracy"] == 0 and deltas["page_proximity"] == pytest.approx(-0.1)
    flips = {f["Question_ID"]: f["change"] for f in c["flips"] if f["what"] == "answer"}
    assert flips == {"1": "broken", "2": "fixed"}  # 4 is wrong in both: not a flip
    assert (c["fixed"], c["broken"]) == (1, 1) and c["not_asked"] == []


def test_metrics_text_says_how_far_the_probabilities_can_be_trusted():
    from webapp.views import metrics_markdown

    m = {"n_questions": 170, "n": 170, "failed": 0, "score": 0.84, "answer_accuracy": 0.73, "doc_accuracy": 0.98,
         "page_proximity": 0.92, "calibration_n": 170, "mean_confidence": 0.76, "answered_accuracy": 0.73,
         "ece": 0.068, "ece_chance": 0.061, "ece_p": 0.35}
    text = metrics_markdown(m, "run")
    assert "probability averaged 76% and it was right 73% of the time" in text and "ECE, 10 bins) 0.068" in text
    assert "would show 0.061 by chance" in text and "no sign that they are off" in text and "too few" not in text
    assert "the probabilities are off" in metrics_markdown({**m, "ece": 0.2, "ece_p": 0.0}, "bad run")
    small = metrics_markdown({**m, "calibration_n": 2}, "small run")
    assert "too few questions to judge their calibration" in small and "ECE" not in small
    assert "Probabilities" not in metrics_markdown({k: v for k, v in m.items() if "ece" not in k}, "old run")


def test_compare_runs_without_gold_lists_changed_answers():
    a = run("a", [rec("1", gold=None), rec("2", gold=None)], {"n_questions": 2})
    b = run("b", [rec("1", answer="B", gold=None), rec("2", gold=None)], {"n_questions": 2})
    c = M.compare_runs(a, b)
    assert [(f["Question_ID"], f["what"], f["change"]) for f in c["flips"]] == [("1", "answer", "changed")]
    assert all(d["B − A"] is None for d in c["deltas"])


def test_runs_saved_listed_and_loaded(tmp_path):
    from pipeline.evaluation.run import write_outputs
    from pipeline.types import Question

    for name in ("old", "new"):
        out = tmp_path / name
        R.save_questions(out, [Question("1", "Що?", ["a", "b", "", "", "", ""], "A", "d.pdf", 1)])
        write_outputs(out, [{"Question_ID": "1", "Correct_Answer": "A", "Doc_ID": "d.pdf", "Page_Num": 1}],
                      [rec("1")], {"score": 1.0})
        time.sleep(0.02)
    os.utime(tmp_path / "old" / "trace.jsonl", (time.time() - 60, time.time() - 60))
    (tmp_path / "unfinished").mkdir()  # no trace.jsonl: not listed
    assert R.list_runs(tmp_path) == ["new", "old"]
    got = R.load_run(tmp_path, "new")
    assert got["metrics"] == {"score": 1.0} and got["traces"][0]["Question_ID"] == "1"
    assert got["questions"]["1"]["text"] == "Що?"
    assert R.unique_run_name(tmp_path, "new") == "new-2"
    with pytest.raises(ValueError):
        R.load_run(tmp_path, "../new")


@pytest.mark.parametrize("raw, clean", [("my run 1", "my-run-1"), ("../../etc/passwd", "etc-passwd"),
                                        ("Прогін №2", "Прогін-2"), ("...", None), ("", None)])
def test_clean_run_name(raw, clean):
    got = R.clean_run_name(raw, now=0)
    assert got == clean if clean else got.startswith("run-")
    assert "/" not in got and not got.startswith(".")


# ---- sessions ---------------------------------------------------------------------------------------
class FakePipe:
    opened: list = []

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "library.sqlite").write_text("")
        self.closed = False
        FakePipe.opened.append(self)


def store(tmp_path, **kw) -> SessionStore:
    return SessionStore(tmp_path, FakePipe, closer=lambda p: setattr(p, "closed", True), **kw)


def test_session_ids_are_random_tokens_and_only_they_become_paths(tmp_path):
    a, b = new_session_id(), new_session_id()
    assert a != b and valid_session_id(a)
    s = store(tmp_path)
    for bad in ("", "../x", "A" * 32, "0" * 31, None, "0" * 32 + "/.."):
        assert not valid_session_id(bad)
        with pytest.raises(ValueError):
            s.session_dir(bad)


def test_sessions_get_separate_dirs_created_lazily(tmp_path):
    s = store(tmp_path)
    a, b = new_session_id(), new_session_id()
    assert not s.exists(a) and not (tmp_path / "sessions").exists()  # nothing made by looking
    with s.open(a) as pa:
        pass
    with s.open(b) as pb:
        pass
    assert pa is not pb
    assert pa.root == tmp_path / "sessions" / a / "library"
    assert pb.root == tmp_path / "sessions" / b / "library"
    assert s.runs_dir(a) != s.runs_dir(b)
    with s.open(a) as again:
        assert again is pa  # reused, not reopened
    assert s.exists(a) and s.exists(b)


def test_shared_library_maps_every_session_to_one_dir(tmp_path):
    s = store(tmp_path, shared=True)
    with s.open(new_session_id()) as p1, s.open(new_session_id()) as p2:
        assert p1 is p2 and p1.root == tmp_path / "library"
    assert s.runs_dir(new_session_id()) == tmp_path / "runs"


def test_open_pipelines_are_bounded_and_busy_ones_kept(tmp_path):
    s = store(tmp_path, max_open=2)
    ids = [new_session_id() for _ in range(4)]
    FakePipe.opened = []
    with s.open(ids[0]) as first:
        for sid in ids[1:]:
            with s.open(sid):
                pass
        assert len(s._open) == 2
        assert not first.closed  # the least recently used, but in use: never closed under a visitor
    closed = [p.root.parent.name for p in FakePipe.opened if p.closed]
    assert closed == [ids[1], ids[2]]


def test_expiry_by_age_and_count_spares_sessions_in_use(tmp_path):
    ids = [new_session_id() for _ in range(6)]
    now = time.time()
    maker = store(tmp_path)
    for i, sid in enumerate(ids):
        with maker.open(sid):
            pass
        t = now - 100 * (6 - i)  # ids[0] oldest, ids[5] newest
        os.utime(tmp_path / "sessions" / sid / ".last_used", (t, t))
    stale = ids[4]  # recent by order, but unused for two hours
    os.utime(tmp_path / "sessions" / stale / ".last_used", (now - 7200, now - 7200))
    s = store(tmp_path, max_sessions=3, max_age_s=3600)
    with s.open(ids[0]):  # in use (and so touched now)
        removed = s.cleanup(now=now)
    left = {p.name for p in (tmp_path / "sessions").iterdir()}
    assert stale in removed
    assert left == {ids[0], ids[5], ids[3]}  # the one in use, then the newest two; ids[1], ids[2] over the count
    assert set(removed) == {ids[1], ids[2], ids[4]}


def test_new_sessions_trigger_cleanup(tmp_path):
    s = store(tmp_path, max_sessions=2)
    ids = [new_session_id() for _ in range(4)]
    for i, sid in enumerate(ids):
        with s.open(sid):
            pass
        t = time.time() - 100 * (4 - i)
        os.utime(tmp_path / "sessions" / sid / ".last_used", (t, t))
    left = {p.name for p in (tmp_path / "sessions").iterdir()}
    assert len(left) <= 3 and ids[3] in left and ids[0] not in left


# ---- views -------------------------------------------------------------------------------------------
def test_md_escape_makes_pdf_text_inert():
    s = md_escape("<img src=x onerror=alert(1)> **bold** [link](http://x) # h\n`code` $x$")
    assert "<" not in s and ">" not in s
    assert "\\*\\*bold\\*\\*" in s and "\\[link\\]\\(http\\:" in s and "\\$x\\$" in s
    assert "\n" not in s
    assert md_escape("a" * 50, limit=10) == "a" * 9 + "…"


def test_failure_text_and_plural():
    assert failure_text("x.pdf", ValueError("x.pdf: the PDF is damaged")) == "the PDF is damaged"
    assert plural(1, "page") == "1 page" and plural(2, "chunk") == "2 chunks"


def test_documents_table_shows_searchable_then_indexed_and_the_answer_says_lexical_only():
    from pipeline.index import DocInfo
    from pipeline.types import Answer, Question
    from webapp.views import answer_markdown, doc_rows

    d = DocInfo("h", "rules.pdf", 150, 400, [], n_embedded=120)
    assert doc_rows([d]) == [["rules.pdf", "searchable (lexical; 120/400 chunks embedded)", 150, 400, ""]]
    d.n_embedded = 400
    assert doc_rows([d])[0][1] == "indexed" and d.state == "indexed"
    q = Question("q", "?", ["a", "b", "c", "d", "e", "f"])
    a = Answer("A", {"A": 0.9}, "rules.pdf", "h", 3, [], [], {}, {"lexical_only_docs": ["rules.pdf", "x.pdf"]})
    assert r"lexical only for 2 documents still embedding: rules\.pdf, x\.pdf" in answer_markdown(q, a)
    a.details["lexical_only_docs"] = []
    assert "lexical only" not in answer_markdown(q, a)


def test_fewer_than_six_options_are_said_and_only_those_charted():
    """Issue 48: a two-option question says "2 options given" and its chart has no empty C–F bars."""
    from pipeline.types import Answer, Question
    from webapp.views import answer_markdown, probs_frame

    q = Question("q", "?", ["так", "ні", "", "", "", ""])
    a = Answer("B", {"A": 0.2, "B": 0.8, "C": 0, "D": 0, "E": 0, "F": 0}, "r.pdf", "h", 3, [], [], {})
    assert "2 options given (A, B): only these were scored." in answer_markdown(q, a)
    assert list(probs_frame(a.probabilities, options=q.options)["option"]) == ["A", "B"]
    six = Question("q", "?", list("abcdef"))
    assert "options given" not in answer_markdown(six, a) and len(probs_frame(a.probabilities, options=six.options)) == 6


def test_the_answer_says_when_it_stood_on_the_top_passage_alone():
    from pipeline.types import Answer, Question
    from webapp.views import answer_markdown

    q = Question("q", "?", ["a", "b", "c", "d", "e", "f"])
    stood = Answer("A", {"A": 0.91}, "r.pdf", "h", 3, [], [], {},
                   {"read_first": {"passages": 1, "probability": 0.91, "prompt_tokens": 700, "enough": True}})
    assert "answered from the top passage alone: the model was sure enough there (91%) that the next passage was " \
        "not read)" in answer_markdown(q, stood)
    stood.details["calibration"] = {"path": "q8_0/extra", "rule": "stood", "power": 1.0, "lapse": 0.1}
    stood.probabilities["A"] = 0.836  # 0.9 × 0.91 + 0.1 / 6: the probability shown differs from the score
    said = answer_markdown(q, stood)
    assert "probability that this answer is right: 84%" in said and \
        "sure enough there (91% before calibration) that the next passage was not read)" in said
    read_on = Answer("A", {"A": 0.7}, "r.pdf", "h", 3, [], [], {},
                     {"read_first": {"passages": 1, "probability": 0.4, "prompt_tokens": 700, "enough": False}})
    assert "top passage alone" not in answer_markdown(q, read_on)


def test_stream_reports_progress_then_result_or_error():
    def work(report):
        for i in range(3):
            report("embed", i / 3)
        return "ok"

    events = list(stream(work))
    assert [k for k, _ in events] == ["progress"] * 3 + ["done"] and events[-1][1] == "ok"

    def bad(report):
        raise RuntimeError("boom")

    (kind, err), = list(stream(bad))
    assert kind == "error" and str(err) == "boom"


def test_failed_questions_summary_names_the_cause_escaped():
    assert failed_text([{"answer": "A"}, {"answer": "B"}]) == ""
    one = failed_text([{"answer": "A"}, {"error": "BackendError: answer server at http://h:1/v1 did not answer within 60 s"}])
    assert one.startswith(", 1 failed (BackendError") and "60 s" in one and "; …" not in one
    two = failed_text([{"error": "BackendError: <b>x</b>"}, {"error": "RuntimeError: y"}])
    assert two.startswith(", 2 failed") and "<b>" not in two and two.endswith("; …)")


def test_the_app_builds_with_its_limits_shown(tmp_path):
    """The whole Blocks app is assembled (no model is loaded: Models are lazy); the upload box states the limit."""
    from pipeline.backends.registry import Models
    from pipeline.settings import load_settings
    from webapp.ui import build_app

    s = load_settings(data_dir=tmp_path, max_upload_mb=7, shared_library=True, max_sessions=3)
    app = build_app(s, models=Models(s))
    upload = next(b for b in app.demo.blocks.values() if getattr(b, "elem_id", None) == "upload")
    assert upload.label == "Upload PDFs (many at once; up to 7 MB each)"
    assert app.store.shared and app.store.max_sessions == 3  # from the settings
    # the endpoints the load test and bench/load.py call keep their names
    names = {d.api_name for d in app.demo.fns.values()}
    assert {"on_load", "on_upload", "on_ask"} <= names, names


def test_app_caps_malloc_arenas_unless_the_environment_says_otherwise():
    """app.py caps glibc's malloc arenas (memory crept up as Gradio's threads served visitors; bench/load.md)."""
    code = "import app; print(app.limit_malloc_arenas())"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(platform.libc_ver()[0] == "glibc")
    out = subprocess.run([sys.executable, "-c", code], env={**env, "MALLOC_ARENA_MAX": "4"}, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"  # glibc already read the user's own setting


# ---- titles, progress, compare, confidence (issue 12) ---------------------------------------------------
def test_doc_label_puts_the_title_first_and_the_file_second():
    from webapp.views import doc_label

    assert doc_label("Інструкція для  медичного застосування", "4e77.pdf") == \
        "Інструкція для медичного застосування — 4e77.pdf"
    assert doc_label("", "a.pdf") == "a.pdf" and doc_label("a.pdf", "a.pdf") == "a.pdf"


def test_progress_html_counts_time_and_escapes():
    from webapp.views import progress_html

    h = progress_html(2, 8, 60.0, "<b>q</b>", left=180)
    assert "2 / 8 questions" in h and "1 min 00 s elapsed" in h and "about 3 min 00 s left" in h
    assert "<b>q</b>" not in h and "width:25.0%" in h
    assert "left" not in progress_html(0, 8, 3.0)  # no estimate before the first question
    assert "left" not in progress_html(2, 8, 60.0, "stopped")  # a stopped run: nothing left to estimate
    # issue 55: the last question past the others' mean is not "about 0 s left"
    last = progress_html(7, 8, 400.0, "question 8", left=0.2)
    assert "finishing the last question" in last and "0 s left" not in last
    assert "about 1 s left" in progress_html(7, 8, 400.0, "question 8", left=0.6)


def test_time_left_goes_down_while_a_question_runs():
    """Issue 33 item 4: 2 of 8 done at 40 s; while question 3 runs the estimate falls (it climbed before)."""
    from webapp.views import time_left

    assert time_left(0, 8, 30.0, 0.0) is None and time_left(8, 8, 99.0, 99.0) is None
    at = [time_left(2, 8, t, 40.0) for t in (40.0, 60.0, 80.0, 200.0, 400.0)]
    assert at[0] == 120.0 and at[1] == 100.0 and at[2] == 100.0  # 6 questions at 20 s, then 5 after the current
    assert all(x >= y for x, y in zip(at, at[1:])), at  # never climbs while one question runs


def test_compare_runs_lists_answer_document_and_page_flips():
    gold = {"answer": "A", "doc": "x.pdf", "page": 2}
    before = {"metrics": {}, "traces": [{"Question_ID": "1", "answer": "A", "doc": "x.pdf", "page": 2, "gold": gold},
                                        {"Question_ID": "2", "answer": "B", "doc": "y.pdf", "page": 2, "gold": gold}]}
    after = {"metrics": {}, "traces": [{"Question_ID": "1", "answer": "A", "doc": "y.pdf", "page": 3, "gold": gold},
                                       {"Question_ID": "2", "answer": "A", "doc": "y.pdf", "page": 2, "gold": gold}]}
    c = M.compare_runs(before, after)
    assert {(f["Question_ID"], f["what"], f["change"]) for f in c["flips"]} == {
        ("1", "document", "broken"), ("1", "page", "broken"), ("2", "answer", "fixed")}
    assert (c["fixed"], c["broken"]) == (1, 0)  # the counts are of answers
    assert c["shared"] == 2 and c["kinds"] is None


def test_runs_that_share_no_question_say_so_not_0_fixed_0_broken():
    """Issue 55 item 11: a six-option run against a plain one (the same Question_IDs or not) shares no question;
    two six-option runs of different questions share none either; neither reads "0 fixed, 0 broken"."""
    from webapp.views import compare_markdown

    six = run("six", [rec("1"), rec("2")], {"score": 1.0})
    plain = run("plain", [{"Question_ID": "1", "answer": "", "abstained": True, "gold": {"answer": ""}}], {"f1": 0.5})
    c = M.compare_runs(six, plain)
    assert (c["shared"], c["kinds"], c["flips"], c["deltas"]) == (0, ("six-option", "plain"), [], [])
    said = compare_markdown("six", "plain", c)
    assert "share no question" in said and "six-option" in said and "plain" in said and "0 fixed" not in said
    other = M.compare_runs(six, run("other", [rec("7")], {"score": 0.0}))
    assert other["shared"] == 0 and other["kinds"] is None
    said = compare_markdown("six", "other", other)
    assert "share no question" in said and "0 fixed" not in said
    assert "0 fixed" in compare_markdown("six", "six", M.compare_runs(six, six))  # sharing questions: counted


def test_a_stopped_run_counts_its_not_asked_questions_apart_from_broken_ones():
    """Comparing with a run stopped after one question: the questions it did not ask are not "broken", and its
    summary gives the seconds of the question it asked, not a median of 0.0 s over the not-asked ones."""
    from webapp.evaluate_tab import shown_metrics
    from webapp.views import compare_markdown, metrics_markdown

    stopped = {"Question_ID": "2", "error": "Stopped: stopped by the user: not asked", "seconds": 0.001,
               "gold": {"answer": "A", "doc": "d.pdf", "page": 1}}
    full = run("full", [rec("1"), rec("2"), rec("3")], {"score": 1.0})
    cut = run("cut", [rec("1", answer="B") | {"seconds": 12.0}, stopped, dict(stopped, Question_ID="3")],
              {"n_questions": 3, "failed": 2, "score": 0.2, "answer_accuracy": 0.0, "doc_accuracy": 0.33,
               "page_proximity": 0.33, "p50_seconds": 0.001})
    c = M.compare_runs(full, cut, not_asked=R.not_asked)
    assert c["not_asked"] == ["2", "3"] and (c["fixed"], c["broken"]) == (0, 1)
    assert {f["Question_ID"] for f in c["flips"]} == {"1"}
    said = compare_markdown("full", "cut", c)
    assert "0 fixed" in said and "1 broken" in said and "2 questions one of the runs did not ask" in said
    m, skipped = shown_metrics(cut)
    assert skipped == 2 and m["p50_seconds"] == 12.0
    text = metrics_markdown(m, "cut", not_asked=skipped)
    assert "stopped after 1, 2 not asked" in text and "0 failed" in text and "Median 12.0 s" in text
    assert R.question_rows(cut["traces"])[1][8] == "not asked (stopped)"
    from webapp.evaluate_tab import kind_choices
    assert ("failed or not asked (2)", M.FAILED) in kind_choices(cut["traces"], skipped)
    # without the web app's marker, a stopped question is a failed one (and a broken answer)
    assert M.compare_runs(full, cut)["broken"] == 3


def test_weak_evidence_rule_and_scorer_title():
    from pipeline.types import Answer, Candidate, Chunk
    from webapp.views import chart_title, not_in_documents, scorer_title

    def ans(fused, details=None):
        ch = Chunk("c", "h", "a.pdf", 0, "", "t", "", [])
        return Answer("A", {"A": 0.9}, "a.pdf", "h", 1,
                      [Candidate(ch, {"fused": fused, "dense": 0.1, "lexical": 0.1}, 1)], [], {}, details or {})

    assert not not_in_documents(ans(0.4)) and not not_in_documents(ans(2.5))  # no fitted flag: no guess
    assert not not_in_documents(ans(0.4, {"not_in_documents": False}))  # the pipeline's flag decides
    assert not_in_documents(ans(2.5, {"not_in_documents": True}))
    # issue 55: "probability", the answer's own word, heads the chart (never "likelihood" beside "probability")
    assert scorer_title(ans(2.5), "option") == "Probability of each option (from its likelihood)"
    assert scorer_title(ans(2.5), "letter") == "Probability of each option (from its letter's probability)"
    assert {chart_title(s) for s in ("option", "listed", "letter", "combined", "")} == {"Probability of each option"}
    assert scorer_title(ans(2.5), "listed").startswith("Probability of each option (")
    assert scorer_title(ans(2.5, {"features": {"listed_support": [1, 0, 0, 0, 0, 0]}}), "listed").endswith(
        "read first, raised by the option's words found in the passages)")


def test_store_adds_the_title_column_to_an_old_library_and_fills_it(tmp_path):
    import sqlite3

    from pipeline.index.store import DocumentStore

    db = sqlite3.connect(tmp_path / "library.sqlite")
    db.executescript("CREATE TABLE documents (doc_hash TEXT PRIMARY KEY, name TEXT, n_pages INTEGER, "
                     "n_chunks INTEGER, added REAL, warnings TEXT);"
                     "CREATE TABLE pages (doc_hash TEXT, number INTEGER, width REAL, height REAL, markdown TEXT, "
                     "words TEXT, spans TEXT, headings TEXT, PRIMARY KEY (doc_hash, number));"
                     "INSERT INTO documents VALUES ('h1', 'leaflet.pdf', 1, 1, 0, '[]');"
                     "INSERT INTO pages VALUES ('h1', 1, 10, 10, '# Парацетамол таблетки\nТекст', '[]', '[]', '[]');")
    db.commit()
    db.close()
    store = DocumentStore(tmp_path, "fp")
    (doc,) = store.documents()
    assert doc.title == "Парацетамол таблетки", doc
    store.close()


def test_candidate_text_is_plain_and_cut_at_a_word():
    from webapp.views import clip, plain

    assert plain("_Дорослим:_ ## **3. Спосіб** застосування a_b") == "Дорослим: 3. Спосіб застосування a_b"
    cut = clip("слово " * 80, 50)
    assert cut.endswith("слово…") and len(cut) <= 50


def free_rec(qid, answer, gold, doc="d.pdf", page=1, gold_doc="d.pdf", gold_page=1):
    return {"Question_ID": qid, "answer": answer, "abstained": not answer, "doc": doc, "page": page,
            "gold": {"answer": gold, "doc": gold_doc if gold else None, "page": gold_page if gold else None},
            "seconds": 1.0}


def test_free_form_runs_have_their_own_kinds_of_error():
    """Abstentions are right for unanswerable questions only; an answer is wrong below token F1 0.5."""
    traces = [free_rec("1", "о 10:00", "о 10:00"), free_rec("2", "", "о 10:00"), free_rec("3", "о 9:00", ""),
              free_rec("4", "", ""), free_rec("5", "понеділок", "о 10:00"), free_rec("6", "о 10:00", "о 10:00",
                                                                                      doc="e.pdf")]
    assert M.kinds_for(traces) == M.FREE_KINDS and M.kinds_for([rec("1")]) == M.KINDS
    assert [M.error_kinds(t) for t in traces] == [[], [M.ABSTAINED], [M.ANSWERED_UNANSWERABLE], [],
                                                  [M.WRONG_ANSWER], [M.WRONG_DOC]]
    counts = M.kind_counts(traces)
    assert counts[M.ABSTAINED] == 1 and counts[M.ANSWERED_UNANSWERABLE] == 1 and counts[M.ALL] == 6
    before = run("a", traces, {"f1": 0.5})
    after = run("b", [free_rec("2", "о 10:00", "о 10:00"), free_rec("4", "о 9:00", "")], {"f1": 0.6})
    c = M.compare_runs(before, after)
    assert {f["Question_ID"]: f["change"] for f in c["flips"]} == {"2": "fixed", "4": "broken"}
    assert [d["metric"] for d in c["deltas"]][:2] == ["f1", "exact_match"]


# ---- issue 26: Stop belongs to a run; what a demo shows -----------------------------------------------
def test_stop_belongs_to_a_run_not_to_a_visitor(tmp_path):
    """Two pages of one visitor each start a run (the second queued behind the first); the first page's Stop
    stops its own run only, and each run's flag is gone once it ends. (With one flag per visitor, the second
    Run replaced the first's flag: the first page's Stop stopped the second page's run.)"""
    import gradio as gr

    from pipeline.settings import load_settings
    from pipeline.types import Question
    from webapp import evaluate_tab as E
    from webapp.common import Context

    settings = load_settings(data_dir=tmp_path)

    class Pipe:  # an Asker whose questions fail with their own message (no model is needed to tell them apart)
        library = type("Lib", (), {"documents": lambda self: []})()

        def __init__(self):
            self.settings = settings

        def search(self, q):
            raise RuntimeError("asked")

        def ask(self, q, on_stage=None, **kw):
            raise RuntimeError("asked")

    ctx = Context(settings, SessionStore(tmp_path, lambda root: Pipe(), closer=lambda p: None), tmp_path)
    with gr.Blocks():
        ui = E.layout(ctx)
    sid = new_session_id()
    parsed = ([Question(f"q{i}", "Що?", ["a", "b", "", "", "", ""], "A", "d.pdf", 1) for i in (1, 2)], [], False)
    first, second = E.on_start(ui, parsed)[ui.token], E.on_start(ui, parsed)[ui.token]  # two pages, one visitor
    assert first != second and len(ui.stops) == 2
    E.on_stop(ui, first)
    said = {}
    for token, name in ((first, "first"), (second, "second")):
        said[name] = list(E.on_run(ctx, ui, sid, parsed, name, False, token))[-1][ui.message]
        E.on_finish(ui, token)
    assert "“first” stopped after 0 of 2 questions" in said["first"]
    assert "“second” finished: 2 questions, 2 failed (RuntimeError\\: asked)" in said["second"]
    errors = {name: [t["error"] for t in R.load_run(ctx.store.runs_dir(sid), name)["traces"]]
              for name in ("first", "second")}
    assert all(R.not_asked({"error": e}) for e in errors["first"]) and errors["second"] == ["RuntimeError: asked"] * 2
    assert len(ui.stops) == 0  # no flag left behind
    E.on_stop(ui, first)  # a Stop after the run ended does nothing (and keeps nothing)
    assert len(ui.stops) == 0
    # issue 48: a reload shows the newest run, and the saved runs are named at the top
    assert E.newest_run(ctx, ui, sid)[ui.shown] == "second"
    assert "**Saved runs** (newest first): second, first." in E.runs_choices(ctx, ui, sid)[ui.saved]
    assert E.newest_run(ctx, ui, new_session_id()) is None and E.saved_line([]) == ""


def _evaluate_tab(tmp_path):
    """Evaluate's components and a context over a store of visitors without a library (runs only)."""
    import gradio as gr

    from pipeline.settings import load_settings
    from webapp import evaluate_tab as E
    from webapp.common import Context

    ctx = Context(load_settings(data_dir=tmp_path), SessionStore(tmp_path, lambda root: None, closer=lambda p: None),
                  tmp_path)
    with gr.Blocks():
        ui = E.layout(ctx)
    return ctx, ui


def _saved_run(runs_dir: Path, name: str, traces: list[dict], mtime: float) -> None:
    import json

    d = runs_dir / name
    d.mkdir(parents=True)
    (d / "trace.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    (d / "metrics.json").write_text(json.dumps({"n_questions": len(traces), "failed": 0, "n": len(traces),
                                                "score": 1.0, "answer_accuracy": 1.0, "doc_accuracy": 1.0,
                                                "page_proximity": 1.0}))
    (d / "questions.json").write_text(json.dumps([{"qid": t["Question_ID"], "text": "Що?", "options": ["a", "b"],
                                                   "gold_answer": "A", "gold_doc": "d.pdf", "gold_page": 1}
                                                  for t in traces]))
    (d / "submission.csv").write_text("Question_ID,Correct_Answer,Doc_ID,Page_Num\n")
    os.utime(d / "trace.jsonl", (mtime, mtime))


def test_compare_and_delete_without_two_runs_say_why_and_never_raise(tmp_path):
    """Issue 55 items 5 and 11: Compare or Delete with no saved run returns its message beside the buttons (an
    error raised would turn the pickers and the message into red "Error" badges); one run is offered as "after"
    only, never as a pair with itself; deleting the run shown shows the newest run left, and says what is left."""
    from webapp import evaluate_tab as E

    ctx, ui = _evaluate_tab(tmp_path)
    sid = new_session_id()
    runs = ctx.store.runs_dir(sid)
    none = E.on_compare(ctx, ui, sid, None, None)
    assert "Comparing needs two saved runs; there is none yet" in none[ui.compare_md]
    assert none[ui.compare_box]["visible"] is False
    gone = E.on_delete_run(ctx, ui, sid, None, "yes", "")
    assert gone[ui.compare_md] == "⚠ There is no saved run to delete." and ui.message not in gone
    assert E.on_open_run(ctx, ui, sid, None) == {ui.message: "⚠ There is no saved run to open."}
    _saved_run(runs, "first", [rec("1")], 1_000_000)
    picks = E.runs_choices(ctx, ui, sid)
    assert picks[ui.run_a]["value"] is None and picks[ui.run_b]["value"] == "first"  # never first → first
    assert "Comparing needs two saved runs; there is one, “first”" in picks[ui.run_a]["info"]
    one = E.on_compare(ctx, ui, sid, None, "first")
    assert "there is one, “first”" in one[ui.compare_md] and ui.deltas in one  # the comparison shown is cleared
    _saved_run(runs, "second", [rec("1", answer="B")], 2_000_000)
    assert E.runs_choices(ctx, ui, sid)[ui.run_a]["value"] == "first" and \
        E.runs_choices(ctx, ui, sid)[ui.run_a]["info"] == ""  # the note goes (None would leave it)
    same = E.on_compare(ctx, ui, sid, "second", "second")
    assert "Before and After are the same run (“second”)" in same[ui.compare_md]
    assert "1 broken" in E.on_compare(ctx, ui, sid, "first", "second")[ui.compare_md]
    # the run shown deleted: the newest left is shown in its place, and what is left is said beside the buttons
    out = E.on_delete_run(ctx, ui, sid, "second", "yes", "second")
    assert out[ui.message] == "Deleted run second. Shown: run first, the newest left."
    assert out[ui.shown] == "first" and out[ui.results_box]["visible"] and out[ui.table_box]["visible"]
    assert "One saved run is left, “first”: comparing needs two." in out[ui.compare_md]
    assert out[ui.run_b]["value"] == "first" and out[ui.run_a]["value"] is None
    last = E.on_delete_run(ctx, ui, sid, "first", "yes", "first")
    assert last[ui.message] == "Deleted run first. No saved run is left." and last[ui.shown] == ""
    assert not last[ui.results_box]["visible"] and R.list_runs(runs) == []


def test_run_the_sample_questions_adds_only_the_sample_pdfs_the_library_lacks(tmp_path):
    """Issue 48: "Run the sample questions" adds the sample corpus's PDFs the library lacks (a stand-in library
    here, recording what it is given: the handler's choice is tested, not indexing) and reads its questions."""
    import gradio as gr

    from types import SimpleNamespace

    from pipeline.documents.ingest import list_pdfs
    from pipeline.settings import load_settings
    from webapp import evaluate_tab as E
    from webapp.common import Context

    sample = Path("assets/sample")
    pdfs = [p.name for p in list_pdfs(sample)]
    added = []

    class Pipe:  # a library that holds the first sample PDF and records what is added
        library = type("Lib", (), {"documents": lambda self: [SimpleNamespace(name=pdfs[0]), *(
            SimpleNamespace(name=n) for n in added)]})()

        def add_pdf(self, data, name):
            assert data[:4] == b"%PDF"
            added.append(name)

    settings = load_settings(data_dir=tmp_path)
    ctx = Context(settings, SessionStore(tmp_path, lambda root: Pipe(), closer=lambda p: None), sample)
    with gr.Blocks():
        ui = E.layout(ctx)
    sid = new_session_id()
    got = E.on_sample_questions(ctx, ui, sid)
    assert added == pdfs[1:] and f"{len(pdfs) - 1} sample PDFs added" in got[ui.message], got[ui.message]
    questions, problems, free = got[ui.parsed]
    assert len(questions) == 12 and not free and questions[0].gold_doc in pdfs
    again = E.on_sample_questions(ctx, ui, sid)  # all there now: nothing added twice
    assert added == pdfs[1:] and "the sample PDFs are in the library" in again[ui.message]
    none = E.on_sample_questions(Context(settings, ctx.store, tmp_path / "none"), ui, sid)
    assert none[ui.parsed] is None and "No sample corpus found" in none[ui.message]


def test_the_indexing_table_says_indexed_once_a_document_is():
    from pipeline.index import DocInfo
    from webapp.library_tab import LATER, status_after

    rows = [["Правила.pdf", "searchable", f"3 pages, 9 chunks{LATER}"], ["b.pdf", "failed", "damaged"]]
    doc = DocInfo("h", "Правила.pdf", 3, 9, [], n_embedded=4)
    assert status_after([list(r) for r in rows], [doc]) is None  # still embedding: nothing to change
    doc.n_embedded = 9
    assert status_after([list(r) for r in rows], [doc]) == [["Правила.pdf", "indexed", "3 pages, 9 chunks"],
                                                            ["b.pdf", "failed", "damaged"]]


def test_why_this_answer_shows_the_runner_up_only_with_lines_of_its_own():
    from types import SimpleNamespace as L

    from pipeline.types import Answer, Question
    from webapp.views import why_markdown

    q = Question("q", "?", ["десять", "двадцять", "c", "d", "e", "f"])
    a = Answer("A", {"A": 0.7, "B": 0.2}, "a.pdf", "h", 1, [], [], {}, {})
    same = [L(page=1, text="Ціна десять гривень."), L(page=1, text="Доба двадцять гривень.")]
    text = why_markdown(q, a, {"A": same, "B": list(reversed(same))})
    assert "runner-up, B) двадцять (20%), has no supporting line other than these" in text
    assert text.count("Ціна десять") == 1 and "| A) десять — 70% |" in text
    own = why_markdown(q, a, {"A": same[:1], "B": same})
    assert "| A) десять — 70% | B) двадцять — 20% |" in own and own.count("Ціна десять") == 1


def test_the_candidates_document_cell_cuts_a_long_title_and_its_column_fits_a_long_word():
    """Issue 55 (cosmetic): a long title in capitals wrapped over 6–9 lines of the Document column, breaking its
    words: the title is cut, and the column is wide enough for a long word of capitals at 1280 px."""
    from webapp.views import CANDIDATE_COLUMNS, CANDIDATE_TITLE_CHARS, CANDIDATE_WIDTHS, candidate_rows

    title = "ПРАВИЛА ДОРОЖНЬОГО РУХУ ДЛЯ ВОДІЇВ АВТОМОБІЛЬНОГО ТРАНСПОРТУ ЗАГАЛЬНОГО КОРИСТУВАННЯ"
    ref = {"rank": 1, "title": title, "doc_name": "pdr.pdf", "pages": [3], "page": 3, "evidence": True,
           "scores": {"rerank": 1.0}, "text": "Текст."}
    cell = candidate_rows([ref])[0][1]
    assert cell.endswith("… — pdr.pdf") and len(cell) <= CANDIDATE_TITLE_CHARS + len(" — pdr.pdf"), cell
    doc = float(CANDIDATE_WIDTHS[CANDIDATE_COLUMNS.index("Document")].rstrip("%"))
    assert doc * 1200 / 100 - 16 >= 9.5 * len("АВТОМОБІЛЬНОГО"), doc  # ~9.5 px a capital, less the cell's padding
    assert sum(float(w.rstrip("%")) for w in CANDIDATE_WIDTHS) == pytest.approx(100)


def test_table_cells_shorten_hashed_names_and_say_what_grounding_means():
    from webapp.views import grounding_text, short_name

    assert short_name("1026d4282a0fb8d22694301adc83729950c8498b.pdf") == "1026d428….pdf"
    assert short_name("muzei.pdf") == "muzei.pdf" and short_name(None) == ""
    said = grounding_text(1.0)
    assert "100% of its words are taken from them" in said and "not that it answers the question" in said


# ---- issue 33: what a new user tripped on, and the Evaluate pictures ------------------------------------------
def _six(details=None, letter="A", p=0.64):
    from pipeline.types import Answer, Question

    q = Question("q", "Які побічні ефекти має сікапротект?", ["a", "b", "c", "d", "e", "f"])
    return q, Answer(letter, {letter: p}, "x.pdf", "h", 2, [], [], {}, details or {})


def test_a_flagged_six_option_answer_reads_not_found_with_the_absent_words_and_what_was_searched():
    from webapp.views import answer_markdown

    q, a = _six({"not_in_documents": True, "flag_basis": "dense+lexical",
                 "flag_features": {"absent_words": ["сікапротект"]}})
    md = answer_markdown(q, a, {"x.pdf": "", "y.pdf": "", "z.pdf": ""})
    assert md.startswith("## Not found in your documents") and "Answer: A" not in md, md
    assert "«сікапротект» occur in no document here" in md and "3 documents of your library" in md, md
    assert "Not an answer" in md  # the model's pick is named only as what it is
    q, a = _six({"not_in_documents": False}, p=0.99)
    md = answer_markdown(q, a, {}, held="How far that holds: …")
    assert md.startswith("## Answer: A") and "The model's probability that this answer is right: 99%" in md, md


def test_a_library_of_one_says_this_document_in_the_heading_the_status_and_the_notes():
    """Issue 55 item 12: under "Not found in this document" the status line never says "your documents"."""
    from webapp.ask_tab import answered_text
    from webapp.views import answer_markdown

    q, a = _six({"not_in_documents": True, "flag_basis": "lexical", "lexical_only_docs": ["x.pdf"],
                 "flag_features": {"absent_words": ["сікапротект"]}})
    md = answer_markdown(q, a, {"x.pdf": "Інструкція"})
    assert md.startswith("## Not found in this document") and "your documents" not in md, md
    assert "whether the answer is in this document was judged on the words alone" in md, md
    assert answered_text("3 s", False, 1) == "Searched in 3 s: not found in this document."
    assert answered_text("3 s", False, 3) == "Searched in 3 s: not found in your documents."
    assert answered_text("3 s") == "Answered in 3 s."
    many = answer_markdown(q, a, {"x.pdf": "", "y.pdf": ""})
    assert many.startswith("## Not found in your documents") and "is in your documents was judged" in many


def _trace(qid, gold_page, cands, evidence, answer="A", gold_answer="A", retrieved=1):
    return {"Question_ID": qid, "answer": answer, "probabilities": {answer: 0.95}, "doc": "x.pdf", "page": 1,
            "gold": {"answer": gold_answer, "doc": "x.pdf", "page": gold_page},
            "gold_rank": {"retrieval": retrieved, "rerank": 1},
            "candidates": [{"chunk_id": c, "doc": "x.pdf", "pages": [p], "scores": {"rerank": r}}
                           for c, p, r in cands], "evidence": evidence}


def test_loss_stage_names_where_the_gold_page_was_lost():
    from webapp import runs as R

    cands = [("c1", 1, 1.36), ("c2", 2, 1.42), ("c3", 3, 0.5)]  # page choice put c1 (rerank 1.36) above c2
    assert R.loss_stage(_trace("a", 1, cands, ["c1", "c3"])) == R.READ_RIGHT
    assert R.loss_stage(_trace("b", 1, cands, ["c1", "c3"], answer="B")) == R.READ_WRONG
    assert R.loss_stage(_trace("c", 2, cands, ["c1", "c3"])) == R.PAGE_CHOICE  # top 2 by rerank, not read
    assert R.loss_stage(_trace("d", 3, cands[:1] + cands[1:], ["c1", "c2"])) == R.BELOW_READ
    assert R.loss_stage(_trace("e", 9, cands, ["c1", "c2"], retrieved=None)) == R.NOT_RETRIEVED
    assert R.loss_stage({**_trace("f", 1, cands, ["c1"]), "error": "Stopped: not asked"}) == R.NOT_ASKED
    assert R.loss_stage({"Question_ID": "g"}) is None  # no gold page
    traces = [_trace("a", 1, cands, ["c1", "c3"]), _trace("c", 2, cands, ["c1", "c3"])]
    groups = R.loss_groups(traces, {"x.pdf": "Правила"})
    assert groups[0]["n"] == 2 and groups[0]["counts"][R.PAGE_CHOICE] == 1 and groups[1]["group"] == "Правила — x.pdf"
    assert [t["Question_ID"] for t in R.filter_lost(traces, R.PAGE_CHOICE, "x.pdf")] == ["c"]
    assert R.filter_lost(traces, R.PAGE_CHOICE, "y.pdf") == []


def test_a_stopped_runs_picture_counts_its_not_asked_questions_as_its_filter_does():
    """Issue 55 item 10: the questions a stopped run never asked have no gold in their traces (the run stopped
    before their search); "where the gold page was lost" takes their gold from the run's questions, so its
    "failed or not asked" bar counts them as the table's filter does."""
    from webapp import runs as R
    from webapp.evaluate_tab import kind_choices
    from webapp.pictures import run_pictures

    cands = [("c1", 1, 1.0)]
    asked = _trace("q1", 1, cands, ["c1"])
    unasked = [{"Question_ID": f"q{i}", "error": "Stopped: stopped by the user: not asked", "seconds": 0.0}
               for i in (2, 3, 4)]
    questions = {f"q{i}": {"qid": f"q{i}", "text": "?", "options": ["a", "b"], "gold_answer": "A",
                           "gold_doc": "y.pdf" if i == 4 else "x.pdf", "gold_page": 1} for i in (1, 2, 3, 4)}
    traces = [asked, *unasked]
    assert R.loss_groups(traces)[0]["counts"][R.NOT_ASKED] == 0  # without the questions: not counted (the bug)
    groups = R.loss_groups(traces, questions=questions)
    assert groups[0]["n"] == 4 and groups[0]["counts"][R.NOT_ASKED] == 3 and groups[0]["counts"][R.READ_RIGHT] == 1
    assert {g["doc"]: g["n"] for g in groups[1:]} == {"x.pdf": 3, "y.pdf": 1}
    assert ("failed or not asked (3)", M.FAILED) in kind_choices(traces, 3)  # the filter's count: the same
    assert [t["Question_ID"] for t in R.filter_lost(traces, R.NOT_ASKED, "", questions)] == ["q2", "q3", "q4"]
    assert [t["Question_ID"] for t in R.filter_lost(traces, "", "y.pdf", questions)] == ["q4"]
    _, losses = run_pictures({"traces": traces, "metrics": {}, "questions": questions}, {})
    assert f"{R.NOT_ASKED} (3)" in losses


def test_reliability_bins_and_how_far_a_probability_held(tmp_path):
    import json

    from webapp import runs as R

    traces = [{**_trace(str(i), 1, [], []), "probabilities": {"A": p}, "answer": "A",
               "gold": {"answer": "A" if right else "B", "doc": "x.pdf", "page": 1}}
              for i, (p, right) in enumerate([(0.95, True), (0.92, True), (0.97, False), (0.35, False)])]
    bins = R.reliability(traces)
    assert [(b["lo"], b["n"], b["right"]) for b in bins] == [(0.3, 1, 0), (0.9, 3, 2)]
    assert R.held_text(tmp_path, 0.9).startswith("How far that holds: not measured")
    run = tmp_path / "first"
    run.mkdir()
    (run / "trace.jsonl").write_text("\n".join(json.dumps(t) for t in traces))
    assert "answers shown at 90%–100% were right 2 of 3 times" in R.held_text(tmp_path, 0.99)
    assert "showed no answer at 50%–60%" in R.held_text(tmp_path, 0.55)


def test_the_pictures_draw_the_chance_band_and_clickable_bars():
    from webapp import pictures as P
    from webapp import runs as R

    cands = [("c1", 1, 1.0)]
    run = {"traces": [_trace("a", 1, cands, ["c1"]), _trace("b", 2, cands, ["c1"], retrieved=None)],
           "metrics": {"ece": 0.05, "ece_chance": 0.06}}
    rel, loss = P.run_pictures(run, {"x.pdf": "<b>Правила</b>"}, "first")
    assert rel.count('class="chance-band"') == 1 and rel.count('class="bin"') == 1 and "0.060 by chance" in rel
    assert f'data-stage="{R.NOT_RETRIEVED}" data-doc="x.pdf"' in loss and "<b>Правила" not in loss
    assert P.band(0.5, 100) == pytest.approx((0.402, 0.598), abs=1e-3)


def test_the_pictures_keep_their_dots_and_labels_inside_the_frame():
    """Issue 48: dots at 0% and 100% were half outside the reliability frame; a document's title in capitals lost
    its first letters off the left of the loss chart («ІПЕРАЦИЛІН…» for «ФІПЕРАЦИЛІН…»)."""
    import re

    from webapp import pictures as P

    bins = [{"lo": lo, "hi": lo + .1, "conf": c, "acc": a, "n": 5, "right": round(5 * a)}
            for lo, c, a in ((0.0, 0.0, 0.0), (0.9, 1.0, 1.0))]
    svg = P.reliability_svg(bins, {})
    x, y, w, h = (float(v) for v in re.search(r'class="frame" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" '
                                              r'height="([\d.]+)"', svg).groups())
    for cx, cy, r in re.findall(r'class="bin" cx="([\d.]+)" cy="([\d.]+)" r="([\d.]+)"', svg):
        cx, cy, r = float(cx), float(cy), float(r)
        assert x <= cx - r and cx + r <= x + w and y <= cy - r and cy + r <= y + h, (cx, cy, r, x, y, w, h)
    title = "ФІПЕРАЦИЛІН ПОРОШОК ДЛЯ РОЗЧИНУ ДЛЯ ІН’ЄКЦІЙ"
    loss = P.loss_svg([{"group": title, "doc": "f.pdf", "n": 1, "counts": {"not retrieved": 1}}], label_w=190)
    x, label = re.search(r'class="loss-label" x="([\d.]+)"[^>]*>([^<]+)<title>', loss).groups()
    assert float(x) >= 0 and 'text-anchor="end"' not in loss  # drawn from the left edge, never off it
    assert label.startswith("ФІПЕРАЦИЛІН") and label.endswith("…") and P.text_px(label) <= 190 - 12, label


def test_a_result_is_marked_previous_once_the_question_changes():
    from types import SimpleNamespace

    from webapp.ask_tab import on_edit

    ui = SimpleNamespace(stale="stale")
    shown = ["Котра година?", "a", "b", "", "", "", ""]
    assert on_edit(ui, shown, *shown) == {"stale": ""}
    assert on_edit(ui, [], "Нове?", *shown[1:]) == {"stale": ""}  # nothing shown yet
    assert "Previous result" in on_edit(ui, shown, "Нове питання?", *shown[1:])["stale"]


# ---- issue 50: who can read what; errors reach the page; times --------------------------------------------------
def test_library_ids_are_issued_by_the_server_and_a_client_picked_one_is_not(tmp_path):
    s = store(tmp_path, secret="s1")
    sid = s.new_id()
    assert valid_session_id(sid) and s.issued(sid)
    assert not s.issued("0" * 32) and not s.issued(new_session_id("another secret")) and not s.issued("../x")
    legacy = "ab" * 16  # a library made before ids were sealed is still its owner's
    with s.open(legacy):
        pass
    assert s.issued(legacy)
    # the files folder's name and the reader token neither are nor reveal the id, and differ per library
    key, other = s.files_key(sid), s.files_key(s.new_id())
    assert key != other and sid not in key and s.reader_token(key) not in (key, sid)


def test_on_load_issues_a_fresh_id_for_one_the_server_did_not_issue(tmp_path):
    from pipeline.backends.registry import Models
    from pipeline.settings import load_settings
    from webapp.ui import build_app

    s = load_settings(data_dir=tmp_path)
    app = build_app(s, models=Models(s))
    dep = next(d for d in app.demo.fns.values() if d.api_name == "on_load")
    first = lambda out: out[dep.outputs[0]]  # noqa: E731 (the id kept in the browser)
    picked = "0123456789abcdef" * 2
    got = first(dep.fn(picked))
    assert got != picked and app.store.issued(got)
    assert first(dep.fn(got)) == got  # the id it issued is kept (a reload, an app restart)


def test_every_event_whose_handler_may_raise_is_queued(tmp_path):
    """Gradio's page drops the error of an event run outside the queue (HTTP 500, no toast): Evaluate's CSV
    refusals were never seen. Every handler that may raise (``common.handled``) must be wired to a queued event."""
    from pipeline.backends.registry import Models
    from pipeline.settings import load_settings
    from webapp.common import raises_to_page
    from webapp.ui import build_app

    s = load_settings(data_dir=tmp_path)
    fns = build_app(s, models=Models(s)).demo.fns.values()
    raising = [d for d in fns if d.fn is not None and raises_to_page(d.fn)]
    assert len(raising) >= 10 and {"on_upload", "on_remove", "on_compare", "on_delete_run"} <= {d.fn.__name__
                                                                                                for d in raising}
    assert [d.fn.__name__ for d in raising if not d.queue] == []


def test_files_live_under_the_library_and_go_with_what_they_belong_to(tmp_path):
    from PIL import Image

    from webapp.files import Files

    s = store(tmp_path, secret="s")
    f, sid = Files(s), s.new_id()
    img = Path(f.image(sid, Image.new("RGB", (4, 4)), "d0c"))
    csv = tmp_path / "submission.csv"
    csv.write_text("x")
    dl = Path(f.download(sid, "run-1", csv))
    assert img.is_file() and dl.read_text() == "x"
    assert s.files_dir(sid) in img.parents and s.files_dir(sid) in dl.parents and sid not in str(img)
    f.drop_document(sid, "d0c")
    f.drop_run(sid, "run-1")
    assert not img.exists() and not dl.exists()
    with pytest.raises(ValueError):
        f.drop_document(sid, "../..")
    # an expired library takes its files with it
    img = Path(f.image(sid, Image.new("RGB", (4, 4)), "d0c"))
    with s.open(sid):
        pass
    os.utime(s.session_dir(sid) / ".last_used", (0, 0))
    assert s.cleanup() == [sid] and not img.exists()


def test_the_file_guard_serves_a_library_s_files_to_its_reader_only(tmp_path, monkeypatch):
    import asyncio
    import threading

    from webapp import files as F

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    s = store(tmp_path / "data", secret="s")
    a, b = s.new_id(), s.new_id()
    mine = s.files_dir(a) / "pages" / "d" / "t" / "page.png"
    token = s.reader_token(s.files_key(a))
    cookie = f"other=1; {F.COOKIE}={token}"
    guard = F.FileGuard(None, s)
    assert guard.allowed(str(mine), cookie)
    assert not guard.allowed(str(mine), "") and not guard.allowed(str(mine), f"{F.COOKIE}=" + "0" * 32)
    assert not guard.allowed(str(mine), f"{F.COOKIE}={s.reader_token(s.files_key(b))}")  # another visitor's
    assert not guard.allowed(str(s.files_dir(b) / ".." / s.files_key(a) / "x.png"), "")  # a way round
    assert not guard.allowed(str(tmp_path / "gradio" / "0123" / "upload.pdf"), cookie)  # uploads: never
    assert guard.allowed("/etc/passwd", "")  # not this guard's: Gradio's own checks refuse it
    assert not guard.allowed(str(mine) + "\x00", cookie)

    sent, passed = [], []

    async def app(scope, receive, send):
        passed.append(scope["path"])

    async def send(msg):
        sent.append(msg)

    guard = F.FileGuard(app, s)
    for headers in ([], [(b"cookie", cookie.encode())]):
        scope = {"type": "http", "path": f"/gradio_api/file={mine}", "headers": headers}
        # in a thread of its own: the browser tests' Playwright (sync API) leaves an event loop running in this one
        t = threading.Thread(target=asyncio.run, args=(guard(scope, None, send),))
        t.start()
        t.join(30)
    assert sent[0]["status"] == 404 and passed == [f"/gradio_api/file={mine}"]


def test_a_time_never_reads_minus_zero():
    from webapp.ask_tab import seconds_text

    assert seconds_text(-0.3) == "0 s" and seconds_text(-0.0) == "0 s" and seconds_text(2.6) == "3 s"


def test_judging_in_ask_lists_and_runs_in_evaluate_for_that_visitor_only(tmp_path):
    """Issue 45: a judgement saved from the Ask tab's row is this visitor's: listed, counted on the run buttons
    and read as a ready set in their Evaluate tab, none of it in a second visitor's; a judgement made after a run
    marks that question in the run's table. (A stand-in library holds the documents' names: the handlers' logic
    is tested, not indexing.)"""
    import gradio as gr

    from dataclasses import asdict
    from types import SimpleNamespace

    from pipeline.evaluation.judged import Shown
    from pipeline.settings import load_settings
    from webapp import evaluate_tab as E
    from webapp import judge_row as J
    from webapp import judged_set as JS
    from webapp.common import Context

    class Pipe:
        library = type("Lib", (), {"documents": lambda self: [SimpleNamespace(name="muzei.pdf", title="Музей"),
                                                               SimpleNamespace(name="parking.pdf", title="")]})()

    ctx = Context(load_settings(data_dir=tmp_path), SessionStore(tmp_path, lambda root: Pipe(), closer=lambda p: None),
                  tmp_path / "none")
    with gr.Blocks():
        row, ui = J.layout(), E.layout(ctx)
    first, second = ctx.store.new_id(), ctx.store.new_id()
    for sid in (first, second):  # a library on disk (its file only: the stand-in holds the documents)
        ctx.store.library_dir(sid).mkdir(parents=True)
        (ctx.store.library_dir(sid) / "library.sqlite").touch()
    q = ["Коли відчиняється музей?", "О 8:00", "О 9:00", "О 10:00", "", "", ""]
    shown = asdict(Shown("B", "muzei.pdf", 1, 0.6, False, "2026-12-07T05:00:00Z"))
    panel = J.on_shown(ctx, row, first, q, shown)
    assert panel[row.doc]["value"] == "muzei.pdf" and panel[row.page]["value"] == 1
    assert [v for _, v in panel[row.option]["choices"]] == ["A", "C"]  # the shown B is not "wrong"'s answer
    said = J.on_wrong(ctx, row, first, q, shown, "B", "", False, "muzei.pdf", 1, "", "")[row.msg]
    assert said.startswith("⚠ Not saved") and "judge it right" in said, said  # nothing kept
    said = J.on_wrong(ctx, row, first, q, shown, "C", "", False, "muzei.pdf", 2, "wrong page", "стор. 2")[row.msg]
    assert said.startswith("✓ Saved as **J001** — judged wrong"), said
    again = J.on_right(ctx, row, first, q, shown)[row.msg]
    assert again.startswith("✓ Updated **J001** (judged before: wrong) — judged right"), again
    assert "Judged before as **J001** (right" in J.on_shown(ctx, row, first, q, shown)[row.msg]
    plain = ["Скільки коштує доба паркування?", "", "", "", "", "", ""]
    got = J.on_wrong(ctx, row, first, plain, asdict(Shown("100 грн", "parking.pdf", 1, None, False, "x")),
                     None, "", True, "parking.pdf", 1, "", "")[row.msg]
    assert got.startswith("✓ Saved as **J002** — judged wrong, the right answer «not in these documents»"), got

    mine, theirs = JS.views(ctx, ui.judged, first), JS.views(ctx, ui.judged, second)
    assert mine[ui.judged.box]["label"] == "Your judged questions (2: 1 six-option, 1 plain) — two runs, one per kind"
    assert list(mine[ui.judged.table]["ID"]) == ["J002", "J001"] and len(mine[ui.judged.files]) == 2
    assert mine[ui.judged.run_options]["visible"] and mine[ui.judged.run_free]["visible"]
    assert theirs[ui.judged.table].empty and not theirs[ui.judged.run_options]["visible"] \
        and theirs[ui.judged.files] is None
    run = JS.on_run_set(ctx, False, ui.parsed, ui.message, first)
    questions, notes, free = run[ui.parsed]
    assert [(x.qid, x.gold_answer) for x in questions] == [("J001", "B")] and not notes and not free
    assert JS.on_run_set(ctx, True, ui.parsed, ui.message, first)[ui.parsed][0][0].gold_answer == ""
    none = JS.on_run_set(ctx, False, ui.parsed, ui.message, second)
    assert none[ui.parsed] is None and "question can run in this library" in none[ui.message]
    # a run of J001, then J001 judged again: its row is marked in that run's table
    out = tmp_path / "run"
    R.save_questions(out, questions)
    os.utime(out / "questions.json", (time.time() - 5, time.time() - 5))
    J.on_wrong(ctx, row, first, q, shown, "A", "", False, "muzei.pdf", 1, "", "")
    after = JS.judged_after(ctx, first, {"dir": out, "questions": {"J001": {"text": q[0]}}})
    assert after == {"J001"} and JS.marked([["J001", q[0]], ["J002", "x"]], after)[0][1].startswith(JS.MARK)
    removed = JS.on_remove(ctx, ui.judged, first, "j001")
    assert "Removed J001" in removed[ui.judged.msg] and list(removed[ui.judged.table]["ID"]) == ["J002"]
    # the downloaded CSV uploaded into another visitor's list: added; a file with no usable row is refused whole
    back = tmp_path / "judged-questions.csv"
    back.write_text(JS.judged(ctx.store, first).export_csv(free=True), encoding="utf-8")  # J002 (J001 removed)
    up = JS.on_upload(ctx, ui.judged, second, str(back))
    assert up[ui.judged.msg].startswith("Uploaded: 1 added"), up[ui.judged.msg]
    assert list(up[ui.judged.table]["ID"]) == ["J002"] and up[ui.judged.run_free]["visible"]
    back.write_text("foo,bar\n1,2\n", encoding="utf-8")
    bad = JS.on_upload(ctx, ui.judged, second, str(back))
    assert bad[ui.judged.msg].startswith("⚠ Not uploaded") and len(bad[ui.judged.table]) == 1, bad[ui.judged.msg]


def test_the_option_order_check_says_its_scores_are_before_calibration():
    """Issue 55: its first row's p(B) 0.794 beside an answer shown at 73% read as a contradiction."""
    from webapp.views import order_markdown

    row = lambda order, b: {"order": order, "answer": "B", "probabilities": {"A": 1 - b, "B": b}}  # noqa: E731
    md = order_markdown({"orders": [row("ABCDEF", 0.794), row("BCDEFA", 0.7)], "stable": True}, {"A": 0.27, "B": 0.73})
    assert "p(B) from 70% to 79%, the model's scores before calibration" in md
    assert "the answer above shows 73% for B" in md


def test_a_flagged_answer_reads_not_found_in_evaluate_as_in_ask():
    """Issue 55 item 8: Ask said "Not found", Evaluate's table "C" (wrong): the table says the flag too, with the
    letter the run was scored on."""
    flagged = rec("7", answer="C") | {"not_in_documents": True}
    rows = R.question_rows([flagged, rec("8", answer="C")])
    assert rows[0][2] == "not found (C)" and rows[1][2] == "C"
