"""Stage-per-process batch evaluation (t4x2-paper's way) and the GPU check's flow, run on the CPU profile.

The stages are the real child processes; with the CPU models they must give what one process gives.
"""
import csv
import json
import subprocess
import sys

from pipeline.evaluation.questions import read_questions
from pipeline.evaluation.run import evaluate
from pipeline.qa import Pipeline
from pipeline.settings import load_settings
from serving import ROOT

QUESTIONS = [
    ["Question_ID", "Question", "A", "B", "C", "D", "E", "F", "Correct_Answer", "Doc_ID", "Page_Num"],
    ["m1", "Як часто слід мити резервуар для води?", "щодня", "щотижня", "щомісяця", "раз на рік", "ніколи",
     "після кожного вмикання", "B", "manual.pdf", "3"],
    ["o1", "Скільки книжок читач може взяти додому?", "одну", "дві", "три", "чотири", "п'ять", "десять",
     "E", "other.pdf", "1"],
]


def test_staged_run_matches_one_process_and_reports_each_stage(tmp_path, models, manual_pdf, other_pdf):
    pdfs = tmp_path / "pdfs"
    pdfs.mkdir()
    (pdfs / "manual.pdf").write_bytes(manual_pdf)
    (pdfs / "other.pdf").write_bytes(other_pdf)
    qcsv = tmp_path / "questions.csv"
    with open(qcsv, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(QUESTIONS)
    # one process, as pipeline.evaluate does
    small = {"top_k_answer": "1", "passage_tokens": "160", "scorer": "letter"}  # short prompts: a quick run
    s = load_settings("cpu", **small)
    pipe = Pipeline(s, root=tmp_path / "one", models=models)
    for p in sorted(pdfs.iterdir()):
        pipe.add_pdf(p.read_bytes(), p.name)
    questions, _ = read_questions(qcsv.read_bytes())
    ref, ref_traces = evaluate(pipe, questions)
    # without a GPU the check refuses to run...
    base = [sys.executable, "-m", "pipeline.gpu.check", "--profile", "cpu", "--pdfs", str(pdfs), "--questions",
            str(qcsv), *[x for k, v in small.items() for x in ("--set", f"{k}={v}")]]
    out = subprocess.run(base + ["--out", str(tmp_path / "x")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2 and "needs a GPU host" in out.stderr
    # ...unless asked for a dry run: staged mode, each stage a child process
    run = tmp_path / "run"
    out = subprocess.run(base + ["--out", str(run), "--mode", "staged", "--allow-no-gpu"], capture_output=True,
                         text=True, cwd=ROOT, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    for stage in ("embed", "rerank", "answer"):
        assert f"== stage {stage} done" in out.stdout
        assert (run / "stages" / f"{stage}.json").exists()
    assert "score:" in out.stdout and "GPU memory: no GPU" in out.stdout
    report = json.loads((run / "gpu_check.json").read_text())
    assert report["mode"] == "staged" and [r["stage"] for r in report["stages"]] == ["embed", "rerank", "answer"]
    stages = {st["stage"]: st for st in json.loads((run / "metrics.json").read_text())["stages"]}
    assert stages["embed"]["passages"] == pipe.library.n_chunks() and stages["embed"]["indexed"] == 2
    assert stages["rerank"]["pairs"] > 0 and stages["answer"]["questions"] == 2
    assert stages["embed"]["gpu"] == {"available": False,
                                      "why": "no NVIDIA GPU visible (nvidia-smi missing or lists no device)"}
    # the same predictions as one process
    with open(run / "submission.csv", encoding="utf-8") as f:
        got = {r["Question_ID"]: (r["Correct_Answer"], r["Doc_ID"], r["Page_Num"]) for r in csv.DictReader(f)}
    want = {t["Question_ID"]: (t["answer"], t["doc"], str(t["page"])) for t in ref_traces}
    assert got == want
    assert report["summary"]["score"] == ref["score"]
