"""bench.answer_speed: the exact McNemar p and the paired summary (synthetic records); the whole command on
the sample's PDFs and two of its questions (the CI smoke test)."""
import json
import shutil
from pathlib import Path

import pytest

from bench.answer_speed import fit_calibration, fit_report, main, scored, shown, summarise, table
from bench.harness import mcnemar_p, pick


def test_mcnemar_exact():
    assert mcnemar_p(0, 0) == 1.0 and mcnemar_p(3, 3) == 1.0
    assert mcnemar_p(0, 5) == pytest.approx(2 / 32)
    assert mcnemar_p(1, 9) == pytest.approx(2 * 11 / 1024)
    assert mcnemar_p(9, 1) == mcnemar_p(1, 9)


def rec(letter, right, seconds, p=0.9):
    return {"letter": letter, "right": right, "seconds": seconds, "score": 0.5 * right, "prompt_tokens": 900,
            "probabilities": {"A": p, "B": 1 - p}}


def test_summary_pairs_the_same_questions():
    base = [rec("A", True, 10), rec("A", True, 8), rec("B", False, 12), rec("A", True, 6)]
    new = [rec("A", True, 5), rec("B", False, 4, 0.4), rec("A", True, 6), rec("A", True, 3)]
    m = summarise(new, base)
    assert m["changed"] == 2 and m["right_to_wrong"] == 1 and m["wrong_to_right"] == 1 and m["mcnemar_p"] == 1.0
    assert m["p50_s"] == 5 and m["p50_ratio"] == pytest.approx(5 / 10) and m["answer_accuracy"] == 0.75
    assert m["max_prob_diff"] == pytest.approx(0.5)
    assert "p50_ratio" not in summarise(base, None)
    assert pick(list("abcdefg"), 3, None) == ["a", "d", "g"] and pick(list("abcdefg"), 2, 2) == ["a", "c"]


def test_summary_says_how_well_the_probabilities_mean_it():
    stood = {"passages": 1, "probability": 0.9, "enough": True}
    recs = [{**rec("A", True, 5, 0.9), "read_first": stood}, {**rec("A", False, 5, 0.9), "read_first": stood},
            {**rec("B", True, 9, 0.6), "read_first": {**stood, "probability": 0.5, "enough": False}}]
    m = summarise(recs, None)
    assert m["mean_top_p"] == pytest.approx(0.8) and m["brier_top"] == pytest.approx((0.01 + 0.81 + 0.16) / 3)
    # calibration error: |0.9 - 0.5| × 2/3 + |0.6 - 1| × 1/3, beside what a calibrated answerer shows by chance
    assert m["ece"] == pytest.approx(0.4) and 0 < m["ece_chance"] < 0.5 and 0 <= m["ece_p"] <= 1
    assert m["stood"]["n"] == 2 and m["stood"]["accuracy"] == 0.5 and m["stood"]["mean_top_p"] == pytest.approx(0.9)
    assert "stood" not in summarise([rec("A", True, 5)], None)  # a path without read_first (main before it)
    printed = table({"long": {"now": {**m, "peak_rss_mb": 4000.0}}}, "now")
    assert "| 0.800 | 0.327 | 0.400 (" in printed and "| long | now | 2 of 3 | 0.500 | 0.900 | 0.410 |" in printed


def six(top: float) -> dict[str, float]:
    return {"A": top, **{L: (1 - top) / 5 for L in "BCDEF"}}


def test_the_calibration_fit_per_first_passage_rule_tempers_the_overconfident_rule_only():
    """``--fit-form rule``: per rule, the power with the lowest Brier score. Answers that stood on the top
    passage at 0.95 and were right 3 times in 4 get a power below 1 (shown less sure); those that read both at
    0.6, right 3 in 5, keep about their probability. A power the run applied is undone before fitting."""
    stood = {"enough": True}
    recs = [{**rec("A", i % 4 != 0, 3, 0.95), "read_first": stood} for i in range(40)] + \
           [{**rec("A", i % 5 < 3, 5, 0.6), "read_first": {"enough": False}} for i in range(40)]
    fitted = fit_calibration(recs, "rule")
    assert fitted["stood"] < 0.8 and 0.8 <= fitted["read"] <= 1.2, fitted
    assert 0.7 < shown(recs[0], fitted)["probabilities"]["A"] < 0.8  # 0.95 shown near the 0.75 it is right
    # a record whose shown probabilities took a power of 0.5 fits as its scored probabilities do
    half = [{**r, **shown(r, {"stood": 0.5, "read": 0.5}), "calibration": {"power": 0.5}} for r in recs]
    assert fit_calibration(half, "rule") == fitted


def test_the_lapse_fit_brings_a_sure_but_often_wrong_answerer_down_and_leaves_an_honest_one():
    """``--fit-form lapse`` (the shipped form): answers shown at 0.97 that are right 4 times in 5 get the lapse
    that shows them near 0.8 ((1 - e) 0.97 + e / 6 = 0.8 at e = 0.21); answers at 0.8 right 4 in 5 get none. A
    lapse and a power a run applied are undone before fitting, and the given options alone take the lapse."""
    sure = [{**rec("A", i % 5 != 0, 3), "probabilities": six(0.97)} for i in range(50)]
    fitted = fit_calibration(sure)
    assert 0.16 <= fitted["lapse"] <= 0.26 and set(fitted) == {"lapse"}, fitted
    assert shown(sure[0], fitted)["probabilities"]["A"] == pytest.approx(0.8, abs=0.04)
    assert fit_calibration([{**r, "probabilities": six(0.8)} for r in sure]) == {"lapse": 0.0}
    applied = [{**r, **shown(r, {"read": 0.7, "lapse": 0.1}), "calibration": {"power": 0.7, "lapse": 0.1}}
               for r in sure]
    assert scored(applied[0])["probabilities"]["A"] == pytest.approx(0.97)
    assert fit_calibration(applied) == fitted
    two = shown({**sure[0], "probabilities": {"A": 0.9, "B": 0.1, "C": 0.0}}, {"lapse": 0.2})["probabilities"]
    assert two == pytest.approx({"A": 0.82, "B": 0.18, "C": 0.0})  # an empty option stays at 0


def test_the_fit_report_shows_each_run_with_what_the_others_fit():
    """Three runs: each shown with the lapse fitted on the other two, all held-out answers together, then the
    lapse fitted on all three shown on a check run."""
    def run(k):
        return (f"run {k}", {"unlp": [{**rec("A", i % 5 != 0, 3), "probabilities": six(0.97)} for i in range(20)]})
    out = fit_report([run(1), run(2), run(3)], [run(4)], "lapse")
    assert out.count("| the others: {'lapse': 0.2") == 3 and "| each from the others | all 3 | unlp | 60 | 0.800 |" in out
    assert 'fitted on all 3: {"lapse": 0.2' in out and "| all 3 | run 4 | unlp | 20 | 0.800 | 0.970," in out


SAMPLE = Path(__file__).resolve().parent.parent / "assets" / "sample"


def tiny_set(folder: Path, doc: str = "biblioteka_pravyla.pdf", n: int = 2) -> Path:
    """A set folder as the benchmarks read one (``pdfs/``, ``questions.csv``): one sample PDF, its first ``n``
    questions."""
    (folder / "pdfs").mkdir(parents=True)
    shutil.copy(SAMPLE / doc, folder / "pdfs" / doc)
    lines = (SAMPLE / "questions.csv").read_text(encoding="utf-8").splitlines()
    (folder / "questions.csv").write_text("\n".join([lines[0], *[ln for ln in lines[1:] if doc in ln][:n]]) + "\n",
                                          encoding="utf-8")
    return folder


def test_the_command_runs_every_question_through_both_variants_and_records_them(tmp_path, capsys):
    """The CI smoke test: the whole command, two workers (main's path and a variant), one set of one PDF."""
    unlp = tiny_set(tmp_path / "unlp", n=1)
    out = tmp_path / "answer_speed.json"
    assert main(["--data-dir", str(tmp_path / "data"), "--unlp", str(unlp), "--long", str(unlp), "--only", "unlp",
                 "--variant", "now:answer_format=q4_k_m", "--out", str(out)]) == 0
    run = json.loads(out.read_text())["runs"][-1]
    assert run["complete"] and run["command"].startswith("python -m bench.answer_speed --data-dir")
    assert run["machine"]["cpu"] and run["machine"]["cores"] >= 1 and "flags" in run["machine"]
    recs = run["records"]["unlp"]
    assert [r["qid"] for r in recs["main"]] == [r["qid"] for r in recs["now"]] == ["sample-01"]
    m = run["summary"]["unlp"]["now"]
    assert m["n"] == 1 and 0 <= m["mcnemar_p"] <= 1 and m["p50_ratio"] > 0 and m["peak_rss_mb"] > 0
    assert "| unlp | now | 1 |" in capsys.readouterr().out
