"""bench.vllm_cpu on a tiny input (the CI smoke test): the ``cpu`` run for real on one sample question, then the
comparison of the two runs' folders. The ``vllm-cpu`` run itself is ``python -m pipeline.evaluate --profile
vllm-cpu`` in .venv-vllm, which tests/test_vllm_engine.py and tests/test_vllm_serve.py exercise; here its folder is
the cpu run's copy, so the two must agree on everything."""
import json
import shutil
from pathlib import Path

from bench.vllm_cpu import main

SAMPLE = Path(__file__).resolve().parent.parent / "assets" / "sample"


def test_the_cpu_run_and_the_comparison(tmp_path, capsys):
    (tmp_path / "pdfs").mkdir()
    shutil.copy(SAMPLE / "lozhenci_instrukciia.pdf", tmp_path / "pdfs")
    lines = (SAMPLE / "questions.csv").read_text(encoding="utf-8").splitlines()
    (tmp_path / "q.csv").write_text("\n".join([lines[0], *[ln for ln in lines if "lozhenci" in ln][:1]]) + "\n",
                                    encoding="utf-8")
    out = tmp_path / "out"
    args = ["--pdfs", str(tmp_path / "pdfs"), "--questions", str(tmp_path / "q.csv"), "--every", "1",
            "--out", str(out)]
    assert main([*args, "--only", "cpu"]) == 0
    assert json.loads((out / "cpu" / "metrics.json").read_text())["n_questions"] == 1
    shutil.copytree(out / "cpu", out / "vllm-cpu")
    md = tmp_path / "table.md"
    assert main([*args, "--only", "none", "--md", str(md)]) == 0
    text = md.read_text(encoding="utf-8")
    assert "command: `python -m bench.vllm_cpu --pdfs" in text
    assert "Same answer on **1 of 1** questions (same evidence on 1; right→wrong 0, wrong→right 0, McNemar p 1.00)" \
        in text
