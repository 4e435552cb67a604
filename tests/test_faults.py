"""Model-server faults in a batch run, against real HTTP servers started here on 127.0.0.1.

Retrieval is the real CPU pipeline (e5 embedder, option reranker) over a generated PDF; the answerer is
the ``remote`` backend pointed at small servers written below that fail the way servers do: HTTP 500,
hanging past ``remote_timeout``, closing the connection, a reply that is not JSON, and a port with
nothing listening. ``FakeCompletions`` is a stand-in for vLLM's ``/v1/completions`` (it returns letter
log-probabilities in vLLM's shape and always prefers D) — a fake server for fault tests, not a model.
"""
import csv
import json
import re
import time
from contextlib import contextmanager

import pytest

from pipeline.backends.registry import Models
from pipeline.errors import BackendError
from pipeline import qa
from pipeline.evaluation.cli import main
from pipeline.evaluation.run import evaluate
from pipeline.qa import Pipeline
from pipeline.settings import load_settings
from pipeline.types import Question
from serving import JsonHandler, free_port, serve

QUESTIONS = [
    Question("q1", "Скільки книжок читач може взяти додому?", ["одну", "дві", "три", "п'ять", "десять", "жодної"]),
    Question("q2", "З якого дня тижня працює бібліотека?", ["з понеділка", "з неділі", "з п'ятниці", "з вівторка",
                                                            "із середи", "із суботи"]),
    Question("q3", "На який строк читач може взяти книжки?", ["7 днів", "14 днів", "30 днів", "21 день", "рік",
                                                             "без строку"]),
]


# ---- servers ---------------------------------------------------------------------------------
class Fault(JsonHandler):
    mode = "500"

    def reply(self, req):
        if self.mode == "500":
            self.send(500, {"error": {"message": "CUDA out of memory", "type": "InternalServerError"}})
        elif self.mode == "hang":  # until the test is over, far beyond remote_timeout
            self.release.wait(30)
        elif self.mode == "close":  # no response at all
            self.close_connection = True
        elif self.mode == "garbage":
            self.send(200, b"<html><body>502 Bad Gateway</body></html>")


class FakeCompletions(JsonHandler):
    """vLLM's /v1/completions shape with letter log-probabilities (D preferred); HTTP 500 for ``fail_on``."""

    fail_on = "З якого дня тижня"

    def reply(self, req):
        if self.path != "/v1/completions":  # no /tokenize: the client falls back to the local Qwen vocabulary
            return self.send(404, {"detail": "Not Found"})
        if self.fail_on in req["prompt"]:
            return self.send(500, {"error": {"message": "the engine crashed"}})
        ids = req["logprob_token_ids"]
        top = {f"token_id:{t}": (-0.05 if i == 3 else -4.0) for i, t in enumerate(ids)}
        self.send(200, {"choices": [{"index": 0, "text": f"token_id:{ids[3]}",
                                     "logprobs": {"tokens": [f"token_id:{ids[3]}"], "top_logprobs": [top]}}],
                        "usage": {"prompt_tokens": 321, "completion_tokens": 1}})


@contextmanager
def answer_server(mode: str):
    if mode == "refused":
        yield f"http://127.0.0.1:{free_port()}"
    else:
        with serve(Fault, mode=mode) as url:
            yield url


# ---- the pipeline ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def library(tmp_path_factory, embedder, other_pdf):
    """A library holding one generated PDF, indexed once with the real CPU embedder."""
    root = tmp_path_factory.mktemp("lib")
    pdfs = tmp_path_factory.mktemp("pdfs")
    (pdfs / "rules.pdf").write_bytes(other_pdf)
    Pipeline(load_settings("cpu"), root=root, models=Models(load_settings("cpu"), embedder=embedder)) \
        .add_pdf(other_pdf, "rules.pdf")
    return root, pdfs


def remote_answerer(server: str, **kw):
    """CPU retrieval, the remote answerer at ``server`` with a 1 s timeout."""
    return dict(answerer="remote", scorer="letter", answer_url=f"{server}/v1", answer_model="served",
                remote_timeout=1.0, **kw)


def pipeline(library, embedder, server: str) -> Pipeline:
    s = load_settings("cpu", **remote_answerer(server))
    return Pipeline(s, root=library[0], models=Models(s, embedder=embedder))


def outputs(out):
    rows = list(csv.DictReader(open(out / "submission.csv", encoding="utf-8")))
    traces = [json.loads(line) for line in open(out / "trace.jsonl", encoding="utf-8")]
    return rows, traces, json.loads((out / "metrics.json").read_text())


CAUSES = {"500": r"answered HTTP 500: CUDA out of memory",
          "hang": r"did not answer within 1 s",
          "close": r"failed: Server disconnected without sending a response",
          "garbage": r"answered with something that is not JSON: '<html><body>502 Bad Gateway",
          "refused": r"cannot be reached: .*Connection refused"}


@pytest.mark.parametrize("mode", list(CAUSES))
def test_a_failing_answer_server_fails_each_question_clearly_and_the_batch_finishes(mode, library, embedder,
                                                                                   tmp_path):
    with answer_server(mode) as url:
        said = rf"answer server at {re.escape(url)}/\S+ {CAUSES[mode]}"
        pipe = pipeline(library, embedder, url)
        with pytest.raises(BackendError, match=said):  # what the web UI's ask handler gets
            pipe.ask(QUESTIONS[0])
        t0 = time.perf_counter()
        result, _ = evaluate(pipe, QUESTIONS, tmp_path)
        took = time.perf_counter() - t0
    rows, traces, metrics = outputs(tmp_path)
    assert [r["Question_ID"] for r in rows] == ["q1", "q2", "q3"] and all(r["Correct_Answer"] == "" for r in rows)
    assert all(r["Doc_ID"] == "rules.pdf" and r["Page_Num"] == "1" for r in rows)  # retrieval's answer is kept
    assert all(re.fullmatch(rf"Backend(Error|Timeout): {said}.*", t["error"]) for t in traces), traces[0]["error"]
    assert metrics["failed"] == result["failed"] == 3 and metrics["not_tried"] == 0
    assert took < 3 * (1.0 + 5.0)  # the 1 s timeout holds (plus retrieval on busy cores)


def test_a_dead_server_is_given_up_after_three_timeouts(library, embedder, tmp_path):
    qs = [Question(f"t{i}", q.text, q.options) for i, q in enumerate(QUESTIONS * 3)]
    with answer_server("hang") as url:
        result, traces = evaluate(pipeline(library, embedder, url), qs, tmp_path)
    assert result["failed"] == 9 and result["not_tried"] == 6
    assert all(t["seconds"] >= 1.0 and "not_tried" not in t for t in traces[:3])
    assert all(t["not_tried"] and t["seconds"] < 0.05 for t in traces[3:])
    assert traces[5]["error"] == (f"BackendTimeout: answer server at {url}/tokenize did not answer within 1 s "
                                  "(not tried: 3 questions in a row timed out on it)")
    rows, _, _ = outputs(tmp_path)
    assert len(rows) == 9


def test_a_server_failing_on_one_question_only(library, embedder, tmp_path):
    with serve(FakeCompletions) as url:
        result, traces = evaluate(pipeline(library, embedder, url), QUESTIONS, tmp_path)
    rows, _, metrics = outputs(tmp_path)
    assert [r["Correct_Answer"] for r in rows] == ["D", "", "D"]
    assert all(r["Doc_ID"] == "rules.pdf" for r in rows)
    assert "error" not in traces[0] and "error" not in traces[2] and traces[0]["prompt_tokens"] == 321
    shown = traces[0]["probabilities"]  # as shown: the default lapse (calibration_by_path) keeps a sure one below 0.92
    assert max(shown, key=shown.get) == "D" and shown["D"] > 0.8
    assert traces[1]["error"] == (f"BackendError: answer server at {url}/v1/completions answered HTTP 500: "
                                  "the engine crashed")
    assert metrics["failed"] == 1 and metrics["n_questions"] == 3


def test_batch_command_with_the_answer_server_down(library, embedder, tmp_path, monkeypatch, capsys):
    real = qa.Models
    monkeypatch.setattr(qa, "Models", lambda settings: real(settings, embedder=embedder))  # reuse the loaded e5
    qcsv = tmp_path / "q.csv"
    qcsv.write_text("Question_ID,Question,A,B,C,D,E,F\n"
                    + "".join(f"{q.qid},{q.text},{','.join(q.options)}\n" for q in QUESTIONS), encoding="utf-8")
    url = f"http://127.0.0.1:{free_port()}"
    sets = [x for k, v in remote_answerer(url).items() for x in ("--set", f"{k}={v}")]
    out = tmp_path / "out"
    assert main(["--pdfs", str(library[1]), "--questions", str(qcsv), "--out", str(out),
                 "--data-dir", str(library[0]), *sets]) == 1  # every question failed
    rows, traces, metrics = outputs(out)
    assert [r["Question_ID"] for r in rows] == ["q1", "q2", "q3"] and metrics["failed"] == 3
    printed = capsys.readouterr()
    assert f"FAILED — BackendError: answer server at {url}/tokenize cannot be reached" in printed.out
    assert "3 of 3 questions failed" in printed.err
