"""bench.flag: the fit's threshold, cross-validation by document, and the rows it writes (synthetic records)."""
import json
import types

import numpy as np

import bench.flag as B
from bench import answer_quality_fit as F


def records(sets=("leaflets", "rulebooks", "generated"), families=("e5", "remote"), n=80, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for s in sets:
        for fam in families:
            rs = []
            for i in range(n):
                absent = i % 2
                for free in (False, True):
                    f = {"q_cov_idf": rng.random() * (0.4 if absent else 1.0), "rare_cov": rng.random(),
                         "rare_absent": rng.random() * absent, "dense_top": 0.89 - 0.02 * absent + 0.01 * rng.random(),
                         "dense_ev": 0.88, "opt_cov_max": rng.random()}
                    rs.append({"qid": str(i), "free": free, "library": "half0" if absent else "full",
                               "gold": {"doc": f"{s}-{i % 10}"}, "flag": f, "fused_max": float(rng.random() * 3)})
            out[(s, fam)] = rs
    return out


def test_the_threshold_lets_at_most_the_target_share_of_present_questions_fire():
    recs = records()[("leaflets", "e5")]
    X, y, _ = B.xy(recs, B.MODELS["flag"])
    m = B.fit(X, y, B.MODELS["flag"], 0.05)
    p = F.predict_logistic(m, X)
    assert (p[y == 0] > m["threshold"]).mean() <= 0.05 + 1e-9
    assert (p[y == 1] > m["threshold"]).mean() > 0.5  # the synthetic absent questions are told apart


def test_a_record_is_judged_by_a_model_fitted_without_its_document(monkeypatch):
    recs = records(sets=("leaflets",), families=("e5", "remote"))
    train, other = recs[("leaflets", "e5")], recs[("leaflets", "remote")]
    X_doc = {tuple(B.xy([r], B.MODELS["flag"])[0][0]): r["gold"]["doc"] for r in train + other}
    calls = []
    fit, predict = B.fit, F.predict_logistic

    def spy_fit(X, y, names, target):
        m = fit(X, y, names, target)
        m["docs"] = {X_doc[tuple(x)] for x in X}
        return m

    def spy_predict(m, X):
        if "docs" not in m:  # the threshold, inside fit
            return predict(m, X)
        calls.append((m["docs"], {X_doc[tuple(x)] for x in X}))
        return predict(m, X)

    monkeypatch.setattr(B, "fit", spy_fit)
    monkeypatch.setattr(F, "predict_logistic", spy_predict)
    fires = B.cross_validated(train, B.MODELS["flag"], 0.05, [other])[0]
    assert calls and all(not (trained & judged) for trained, judged in calls)  # never its own document
    assert len(calls) == F.REPEATS * F.FOLDS and fires.shape == (len(other),)


def test_rows_cover_every_set_profile_and_basis(tmp_path):
    a = types.SimpleNamespace(targets=B.TARGETS, shipped={})
    rows, final = B.measure(a, records())
    assert set(final) == {"flag", "flag_free", "flag_lexical", "flag_free_lexical"}
    assert all("fitted_on" in m and "threshold" in m for m in final.values())
    assert {(r["set"], r["profile"]) for r in rows} == {(s, f) for s in ("leaflets", "rulebooks", "generated")
                                                          for f in ("e5", "remote")}
    # other embedders get the lexical model only (their similarities have another scale), and the former rule
    assert {r["basis"] for r in rows if r["profile"] == "remote"} == {"lexical", "fused z <= 1 (former rule)"}
    for r in rows:
        assert {"set", "profile", "n", "false_fire_rate", "absent_recall"} <= set(r)
        assert r["n"] == r["n_present"] + r["n_absent"] and 0 <= r["false_fire_rate"] <= 1
    json.dumps(rows)
    assert "| leaflets | e5 |" in B.table(rows)
