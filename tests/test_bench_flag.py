"""bench.flag: the libraries it builds at each size, the fit's threshold at every size, cross-validation by
document, the rows it writes (synthetic records), and one real run on a tiny input (its CI smoke test)."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import bench.flag as B
from bench import fitting as F

ROOT = Path(__file__).resolve().parents[1]


def test_each_size_has_a_library_with_the_document_and_one_without_it():
    kinds = {"leaflets": [f"l{i}.pdf" for i in range(30)], "rulebooks": [f"r{i}.pdf" for i in range(4)]}
    rows = B.plan(kinds)
    everything = set(kinds["leaflets"]) | set(kinds["rulebooks"])
    assert {(r["set"], r["size"]) for r in rows} == {("leaflets", s) for s in B.SIZES} | {
        ("rulebooks", s) for s in ("1", "3", "all")}  # 4 rulebooks: no library of 10 of them
    for r in rows:
        assert r["doc"] in r["present"] and r["doc"] not in r["absent"], r
        if r["size"] == "all":
            assert r["present"] == everything and len(r["absent"]) >= len(everything) - 3
        else:
            k = int(r["size"])
            assert len(r["present"]) == len(r["absent"]) == k
            assert set(r["present"]) | set(r["absent"]) <= set(kinds[r["set"]])  # absent: others of its kind
    assert len({r["present"] for r in rows if r["set"] == "leaflets" and r["size"] == "3"}) == 10  # blocks


def test_the_sizes_measured_are_the_ones_the_app_reads():
    from pipeline.answering import flag

    assert B.SIZES == tuple(name for name, _ in flag.SIZES)
    assert [flag.size_of(n) for n in (1, 2, 3, 5, 6, 10, 19, 20, 34, 200)] == \
        ["1", "3", "3", "3", "10", "10", "10", "all", "all", "all"]


NAMES = sorted({n for names in B.MODELS.values() for n in names})


def records(n_docs=12, per_doc=6, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for d in range(n_docs):
        for i in range(per_doc):
            for size in B.SIZES:
                for present in (True, False):
                    for free in (False, True):
                        shift = 0.0 if present else 0.5
                        f = {n: float(np.clip(rng.random() - shift * (n != "rare_absent") + shift * (n == "rare_absent"),
                                              0, 1)) for n in NAMES}
                        f["dense_top"] = 0.89 - 0.02 * (not present) + 0.01 * rng.random()
                        out.append({"qid": f"{d}-{i}", "set": "leaflets", "size": size, "present": present,
                                    "free": free, "family": "e5", "doc": f"doc{d}", "library": "x", "flag": f,
                                    "fired": bool(rng.random() < 0.3), "basis": "dense+lexical"})
    return out


def test_the_threshold_lets_at_most_the_target_share_of_present_questions_fire_at_every_size():
    recs = [r for r in records() if not r["free"]]
    m = B.fit(recs, B.MODELS["flag"], 0.05)
    fired = B.fires(m, recs)
    for size in B.SIZES:
        idx = [i for i, r in enumerate(recs) if r["size"] == size and r["present"]]
        assert fired[idx].mean() <= 0.05 + 1e-9, size
    absent = [i for i, r in enumerate(recs) if not r["present"]]
    assert fired[absent].mean() > 0.5  # the synthetic absent questions are told apart
    assert set(m["thresholds"]) == set(B.SIZES) and m["threshold"] == max(m["thresholds"].values())


def test_a_record_is_judged_by_a_model_fitted_without_its_document(monkeypatch):
    recs = [r for r in records() if not r["free"]]
    calls, xy = [], B.xy

    def spy_xy(rs, names):  # called by fit (its training records), then for the fold it judges, in turn
        calls.append({r["doc"] for r in rs})
        return xy(rs, names)

    monkeypatch.setattr(B, "xy", spy_xy)
    fires = B.cross_validated(recs, B.MODELS["flag"], 0.05)
    trained, judged = calls[0::2], calls[1::2]
    assert len(trained) == len(judged) == F.REPEATS * F.FOLDS and fires.shape == (len(recs),)
    assert all(t and j and not (t & j) for t, j in zip(trained, judged))  # never by its own document


def test_the_small_libraries_fire_on_fewer_present_questions_when_asked():
    recs = [r for r in records() if not r["free"]]
    m = B.fit(recs, B.MODELS["flag"], 0.05, small=0.01)
    fired = B.fires(m, recs)
    for size in B.SIZES:
        idx = [i for i, r in enumerate(recs) if r["size"] == size and r["present"]]
        assert fired[idx].mean() <= (0.01 if size in B.SMALL else 0.05) + 1e-9, size
    assert m["thresholds"]["1"] >= B.fit(recs, B.MODELS["flag"], 0.05)["thresholds"]["1"]


def test_held_out_halves_judge_each_document_by_a_model_fitted_on_the_other_half_only(monkeypatch):
    recs = [r for r in records() if not r["free"]]
    half = B.halves(recs)
    docs = sorted({r["doc"] for r in recs}, key=B.order_key)
    assert [half[("leaflets", d)] for d in docs] == [i % 2 for i in range(len(docs))]
    calls, xy = [], B.xy

    def spy_xy(rs, names):
        calls.append({half[(r["set"], r["doc"])] for r in rs})
        return xy(rs, names)

    monkeypatch.setattr(B, "xy", spy_xy)
    out = B.held_out_halves(recs, B.MODELS["flag"], 0.05, half)
    assert calls == [{1}, {0}, {0}, {1}] and set(np.unique(out)) <= {0.0, 1.0}  # fit on 1, judge 0; and back


def test_a_fire_naming_a_common_word_is_counted():
    assert B.common_named(["ретаболілу", "статися", "вживання", "фервекс"]) == ["статися", "вживання"]
    recs = records(n_docs=4, per_doc=2)
    for r in recs:
        r["fired"], r["named"] = True, ["статися"] if r["qid"] == "0-0" else ["фервекс"]
    rows, _ = B.measure([r for r in recs if not r["free"]], [r for r in recs if not r["free"]], B.TARGETS)
    before = [r for r in rows if r["variant"] == "before" and r["size"] == "1"][0]
    assert before["fires_naming_common"] == 2 and before["common_named"] == ["статися"]  # present and absent
    assert "2 of 16 ✗ («статися»)" in B.table(rows)


def test_rows_say_before_and_now_per_set_size_and_kind_of_question():
    recs = records()
    rows, final = B.measure(recs, recs, B.TARGETS)
    assert set(final) == {"flag", "flag_free"}  # no lexical-only records here: no lexical models
    assert all("fitted_on" in m and "threshold" in m for m in final.values())
    assert {(r["variant"], r["size"], r["questions"]) for r in rows} == {
        (v, s, q) for v in ("before", "now", "halves") for s in B.SIZES for q in ("six-option", "free-form")}
    for r in rows:
        assert 0 <= r["false_fire_rate"] <= 1 and 0 <= r["absent_recall"] <= 1
    json.dumps(rows)
    assert "| leaflets | 1 | six-option | e5 |" in B.table(rows)


def test_a_real_run_on_two_tiny_sets(tmp_path):
    """The whole benchmark on the sample's four PDFs (two "leaflets", two "rulebooks"), with the real models,
    ``--base-tree`` this checkout (so the worker process runs): it builds, asks, fits and writes its table."""
    sample = ROOT / "assets" / "sample"
    lines = (sample / "questions.csv").read_text(encoding="utf-8").splitlines()
    for kind, docs in (("unlp", ["biblioteka_pravyla.pdf", "lozhenci_instrukciia.pdf"]),
                       ("long", ["futbol_reglament.pdf", "termostat_posibnyk.pdf"])):
        (tmp_path / kind / "pdfs").mkdir(parents=True)
        for d in docs:
            shutil.copy(sample / d, tmp_path / kind / "pdfs" / d)
        qs = [ln for ln in lines[1:] if any(f",{d}," in ln for d in docs)][:4]
        (tmp_path / kind / "questions.csv").write_text("\n".join([lines[0], *qs]) + "\n", encoding="utf-8")
    out, md = tmp_path / "flag.json", tmp_path / "flag.md"
    assert B.main(["--unlp", str(tmp_path / "unlp"), "--unlp-long", str(tmp_path / "long"), "--data-dir",
                   str(tmp_path / "data"), "--base-tree", str(ROOT), "--out", str(out), "--md", str(md)]) == 0
    run = json.loads(out.read_text(encoding="utf-8"))
    sizes = {(r["variant"], r["set"], r["size"], r["family"]) for r in run["rows"]}
    for v in ("before", "now"):
        for kind in ("leaflets", "rulebooks"):
            assert {(v, kind, s, f) for s in ("1", "all") for f in B.FAMILIES} <= sizes
    assert run["cpu"] and "| leaflets | 1 | six-option | e5 |" in md.read_text(encoding="utf-8")
