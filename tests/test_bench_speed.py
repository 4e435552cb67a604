"""bench.speed on a tiny input (the CI smoke test): one sample PDF indexed from scratch and one question asked;
then a generated 3-page PDF indexed progressively."""
import shutil
from pathlib import Path

from bench.speed import main

SAMPLE = Path(__file__).resolve().parent.parent / "assets" / "sample"


def test_indexing_and_seconds_per_question_are_measured_and_written(tmp_path):
    (tmp_path / "pdfs").mkdir()
    shutil.copy(SAMPLE / "termostat_posibnyk.pdf", tmp_path / "pdfs")
    out = tmp_path / "speed.md"
    main(["--pdfs", str(tmp_path / "pdfs"), "--questions", str(SAMPLE / "questions.csv"), "--layout-files", "1",
          "--embed-n", "4", "--e5-n", "4", "--questions-n", "1", "--out", str(out)])
    text = out.read_text(encoding="utf-8")
    assert "command: `python -m bench.speed --pdfs" in text and "cores" in text
    assert "| index 1 PDFs from scratch |" in text and "| seconds per question (1 questions) | p50 " in text
    assert "| parse+chunk, fast mode (all files) |" in text and "| peak RSS |" in text

    progressive = tmp_path / "progressive.md"
    main(["--long-pdf-pages", "3", "--out", str(progressive)])
    text = progressive.read_text(encoding="utf-8")
    assert "3-page PDF: upload → searchable" in text and "indexed (every chunk embedded" in text
