"""bench.freeform's table: each variant's F1 against the full system's, paired by question."""
import math

from bench.freeform import paired_f1_delta, table


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
