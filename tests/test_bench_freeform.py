"""bench.freeform's table: each variant's F1 against the full system's, paired by question; the two commands on
a tiny input (the CI smoke test)."""
import json
import math
import os
from pathlib import Path

from bench.freeform import not_found_causes, paired_f1_delta, table


def rows(preds: list[str], golds: list[str]) -> list[dict]:
    return [{"qid": str(i), "pred": p, "gold": g, "seconds": 1.0 + i} for i, (p, g) in enumerate(zip(preds, golds))]


GOLD = ["36 місяців", "150 гривень", "щотижня", "два роки", ""]


def test_paired_delta_is_exact_when_every_question_moves_alike():
    base = rows(["", "", "", "", ""], GOLD)
    better = rows(GOLD[:4] + [""], GOLD)  # every answerable question from F1 0 to 1; the unanswerable one ignored
    assert paired_f1_delta(better, base) == (1.0, 1.0, 1.0)
    assert paired_f1_delta(base, base) == (0.0, 0.0, 0.0)


def test_paired_interval_spans_zero_when_changes_cancel():
    base = rows(["36 місяців", "", "щотижня", "", ""], GOLD)
    mixed = rows(["", "150 гривень", "", "два роки", ""], GOLD)  # two fixed, two broken
    d, lo, hi = paired_f1_delta(mixed, base)
    assert d == 0.0 and lo < 0 < hi
    assert all(math.isnan(x) for x in paired_f1_delta(rows(["x"], [""]), base[:0]))


def test_table_reports_the_delta_and_the_seconds_of_each_kind():
    base = rows(["", "", "", "", ""], GOLD)
    out = table({"full": base, "better": rows(GOLD[:4] + [""], GOLD)}, "5 questions")
    full_line, better_line = out.splitlines()[-2:]
    assert "| full | 0.000 | – |" in full_line and full_line.endswith("| 3.0 / 5.0 |")  # p50 answerable / not (nearest rank: of two, the upper)
    assert "| better | 1.000 | +1.000 (+1.000 … +1.000) |" in better_line


def test_false_not_found_is_counted_by_its_cause_and_grounding_discards_apart():
    flag = "the library seems not to hold it: its words «фервексу» occur in no document here; the search alone …"
    rs = [{"qid": "1", "pred": "", "gold": "36 місяців", "reasons": [flag]},
          {"qid": "2", "pred": "", "gold": "щотижня", "reasons": ["not grounded in the passages (0.00 of its words)"],
           "grounding_discards": 2},
          {"qid": "3", "pred": "", "gold": "два роки", "reasons": ["the model found no answer"],
           "grounding_discards": 1},
          {"qid": "4", "pred": "150 гривень", "gold": "150 гривень", "reasons": [], "grounding_discards": 1},
          {"qid": "5", "pred": "", "gold": "", "reasons": ["not grounded in the passages (0.10 of its words)"]}]
    assert not_found_causes(rs) == {"flag": 1, "grounding": 1, "model": 1, "discarded": 3}  # unanswerable not counted
    assert "| 1 / 1 / 1 | 3 |" in table({"full": [{**r, "seconds": 1.0} for r in rs]}, "5 questions")


def test_the_commands_build_the_set_and_measure_two_variants_on_one_question_pair(tmp_path):
    """The CI smoke test: ``build`` on two sample PDFs (their 7 questions, the two half libraries), then ``run`` on
    one answerable question and its unanswerable copy, the full system and the extractive mode."""
    from bench.freeform import main

    sample = Path(__file__).resolve().parent.parent / "assets" / "sample"
    work = tmp_path / "ff"
    assert main(["build", "--questions", str(sample / "questions.csv"), "--pdfs", str(sample), "--docs", "2",
                 "--work", str(work)]) == 0
    assert len((work / "answerable.csv").read_text(encoding="utf-8").splitlines()) == 1 + 7
    assert main(["run", "--every", "7", "--only", "full system (generative)", "--only",
                 "extractive instead of generative", "--flag-records", str(tmp_path / "none.jsonl"),
                 "--work", str(work), "--record", str(tmp_path / "freeform.json")]) == 0
    text = (work / "table.md").read_text(encoding="utf-8")
    run = json.loads((tmp_path / "freeform.json").read_text())["runs"]
    assert len(run) == 1 and run[0]["complete"] and run[0]["machine"]["cores"] == os.cpu_count()
    full, ext = run[0]["variants"]["full system (generative)"], run[0]["variants"]["extractive instead of generative"]
    assert full["n"] == ext["n"] == 2 and full["f1_vs_first"] is None and len(ext["f1_vs_first"]) == 3
    assert full["answerable_p50_s"] > 0 and full["unanswerable_p50_s"] >= 0
    assert "command: `python -m bench.freeform run --every 7" in text
    assert "1 answerable + 1 unanswerable questions" in text
    assert "| full system (generative) |" in text and "| extractive instead of generative |" in text


def test_the_held_out_flag_is_fitted_without_the_questions_document(tmp_path):
    """``HeldOutFlag`` refits bench.flag's free-form model on the records of every other document (bench.flag's
    record format), with its thresholds per library size, as the app reads them."""
    import numpy as np

    from bench.flag import MODELS
    from bench.freeform import HeldOutFlag
    from pipeline.answering.flag import threshold

    rng, lines = np.random.default_rng(0), []
    for i in range(120):
        present = i % 2 == 0
        flag = {n: float(rng.normal(1.0 if present else 0.0, 0.3)) for n in MODELS["flag_free"]}
        lines.append(json.dumps({"qid": str(i), "set": "leaflets", "size": ("1", "all")[i % 4 // 2], "present": present,
                                 "free": True, "family": "e5", "doc": f"d{i % 6}.pdf", "library": "x", "flag": flag}))
    lines.append(json.dumps({"qid": "x", "free": False, "family": "e5", "doc": "d0.pdf", "flag": {}}))  # six-option
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    held = HeldOutFlag([path])
    m = held("d0.pdf")["flag_free"]
    assert len(held.recs) == 120 and set(m["thresholds"]) == {"1", "all"}
    assert threshold(m, 1) == m["thresholds"]["1"] and threshold(m, 30) == m["thresholds"]["all"]
    assert held("d0.pdf") is held("d0.pdf") and held("d1.pdf")["flag_free"]["weights"] != m["weights"]
