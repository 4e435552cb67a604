"""``python -m bench.answer_quality fit``: grouped cross-validation of the scorers and the combiner,
calibration, the not-in-documents flag, the fitted weights and the table (see bench/answer_quality.py)."""
from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import numpy as np

from pipeline.answering import calibration as cb
from pipeline.evaluation import scoring
from pipeline.evaluation.metric import competition_score, page_proximity
from pipeline.evaluation.questions import read_questions
from pipeline.types import LETTERS

FOLDS, REPEATS, L2 = 5, 5, 1.0
# the groups each feature needs (for the s/question estimate); the shared prefix and retrieval always
NEEDS = {"option": {"option"}, "option_sum": {"option"}, "pmi": {"option", "neutral"},
         "pmi_sum": {"option", "neutral"}, "letter": {"letter"}, "letter0": {"letter0"}, "verify": {"verify"},
         "cov": {"support"}, "bm25": {"support"}}
ALONE = ["option", "option_sum", "pmi", "pmi_sum", "letter0", "letter", "verify", "cov", "bm25"]
COMBOS = {
    "option + option_sum": ["option", "option_sum"],
    "option + pmi": ["option", "pmi"],
    "option + pmi_sum": ["option", "pmi_sum"],
    "option + option_sum + pmi_sum + support": ["option", "option_sum", "pmi_sum", "cov"],
    "option + pmi + support": ["option", "pmi", "cov"],
    "option + pmi + letter": ["option", "pmi", "letter"],
    "option + pmi + letter0 + support": ["option", "pmi", "letter0", "cov"],
    "option + pmi + letter + support": ["option", "pmi", "letter", "cov"],
    "option + pmi + letter + verify + support": ["option", "pmi", "letter", "verify", "cov"],
}
THRESHOLD = 0.5  # the flag fires when "absent" is the likelier of the two (the fit's classes are balanced)
FLAG = ["q_cov_idf", "rare_cov", "rare_absent", "dense_top", "opt_cov_max"]
FLAG_FREE = [n for n in FLAG if not n.startswith("opt_")]  # questions without options (retrieved by the question)


def wilson(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return c - h, c + h


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties counted half."""
    pos, neg = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float((pos > neg).mean() + 0.5 * (pos == neg).mean())


def sign_test(only_a: int, only_b: int) -> float:
    """Exact two-sided sign test on the questions where exactly one of two scorers is right."""
    m = only_a + only_b
    return min(1.0, 2 * sum(math.comb(m, i) for i in range(min(only_a, only_b) + 1)) / 2 ** m) if m else 1.0


def grouped_folds(groups: list[str], k: int, seed: int) -> list[np.ndarray]:
    uniq = sorted(set(groups))
    rng = np.random.default_rng(seed)
    rng.shuffle(uniq)
    fold_of = {g: i % k for i, g in enumerate(uniq)}
    f = np.array([fold_of[g] for g in groups])
    return [np.where(f == i)[0] for i in range(k) if (f == i).any()]


class Data:
    def __init__(self, recs: list[dict], questions: dict, n_pages: dict):
        self.recs = recs
        self.q = [questions[r["qid"]] for r in recs]
        self.y = np.array([LETTERS.index(q.gold_answer) for q in self.q])
        self.M = np.stack([cb.option_mask(q.options) for q in self.q])
        self.groups = [q.gold_doc for q in self.q]
        self.n_pages = n_pages

    def prior(self, idx) -> np.ndarray:
        """The letter scorer's mean log-probability per position (unshifted prompt), over ``idx``."""
        return np.mean([self.recs[i]["letter_pos"]["0"] for i in idx], axis=0)

    def X(self, names, idx, prior=None) -> np.ndarray:
        return np.stack([cb.matrix(self.recs[i], names, prior) for i in idx])

    def score(self, pred: np.ndarray) -> dict:
        rows = []
        for r, q, p in zip(self.recs, self.q, pred):
            page = r["pages_by_letter"][p]
            rows.append((p == LETTERS.index(q.gold_answer), r["doc"] == q.gold_doc,
                         page_proximity(r["doc"], page, q.gold_doc, q.gold_page, self.n_pages.get(q.gold_doc, 0))))
        a = np.array(rows, dtype=float).mean(axis=0)
        return {"acc": a[0], "doc": a[1], "page": a[2], "score": competition_score(*a)}


def cv_predict(d: Data, names: list[str], seed: int, fit_weights: bool = True):
    """Held-out logits and calibrated probabilities for every question (one grouped K-fold split).

    ``fit_weights`` False: a single feature used as it is (weight 1), only its temperature fitted.
    The temperature is fitted on out-of-fold logits inside each training set (nested).
    """
    n = len(d.recs)
    Z, P = np.zeros((n, 6)), np.zeros((n, 6))
    for test in grouped_folds(d.groups, FOLDS, seed):
        train = np.setdiff1d(np.arange(n), test)
        prior = d.prior(train) if all("letter_pos" in r for r in d.recs) else None
        model = fit_model(d, names, train, prior, fit_weights)
        Xt = d.X(names, test, prior)
        z = ((Xt - model["mean"]) / model["scale"]) @ model["weights"]
        Z[test] = z
        for j, i in enumerate(test):
            P[i] = cb.softmax_masked(z[j] / model["temperature"], d.M[i])
    return Z, P


def fit_model(d: Data, names, train, prior, fit_weights=True, inner=True) -> dict:
    X = d.X(names, train, prior)
    m = X[d.M[train]].mean(axis=0)
    s = X[d.M[train]].std(axis=0) + 1e-9
    if not fit_weights:
        m, s = np.zeros(len(names)), np.ones(len(names))
        w = np.ones(len(names))
    else:
        w = cb.fit_clogit((X - m) / s, d.y[train], d.M[train], L2)
    T = 1.0
    if inner:  # out-of-fold logits inside the training set, for an honest temperature
        zo = np.zeros((len(train), 6))
        gtr = [d.groups[i] for i in train]
        for f in grouped_folds(gtr, FOLDS, 12345):
            rest = np.setdiff1d(np.arange(len(train)), f)
            if fit_weights:
                mi, si = X[rest][d.M[train][rest]].mean(axis=0), X[rest][d.M[train][rest]].std(axis=0) + 1e-9
                wi = cb.fit_clogit((X[rest] - mi) / si, d.y[train][rest], d.M[train][rest], L2)
            else:
                mi, si, wi = m, s, w
            zo[f] = ((X[f] - mi) / si) @ wi
        T = cb.fit_temperature(zo, d.y[train], d.M[train])
    return {"features": names, "mean": m, "scale": s, "weights": w, "temperature": T,
            "letter_prior": None if prior is None else list(map(float, prior))}


def evaluate_scorer(d: Data, names, fit_weights, seconds) -> dict:
    accs, eces, scores, P0 = [], [], [], None
    for r in range(REPEATS if fit_weights else 3):
        Z, P = cv_predict(d, names, seed=r, fit_weights=fit_weights)
        pred = np.array([int(np.argmax(np.where(m, z, -np.inf))) for z, m in zip(Z, d.M)])
        sc = d.score(pred)
        conf = P.max(axis=1)
        accs.append(sc["acc"])
        scores.append(sc["score"])
        eces.append(scoring.ece(conf, (pred == d.y).astype(float)))
        if P0 is None:
            P0, right0 = P, pred == d.y
    groups = set().union(*(NEEDS[n] for n in names))
    secs = [s["retrieve"] + s["prefix"] + sum(s.get(g, 0.0) for g in groups if g != "letter0")
            + (s.get("letter", 0.0) / max(1, s["n_shifts"]) if "letter0" in groups and "letter" not in groups else 0)
            for s in seconds]
    return {"acc": float(np.mean(accs)), "score": float(np.mean(scores)), "ece": float(np.mean(eces)),
            "p50": float(np.median(secs)), "P": P0, "right": right0}


def reliability_png(path: Path, curves: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """A reliability diagram drawn with Pillow (in requirements.txt; no plotting library needed)."""
    from PIL import Image, ImageDraw

    W, H, L, B, S = 560, 640, 60, 130, 460  # size, left margin, bottom margin, plot side
    img = Image.new("RGB", (W, H), "white")
    g = ImageDraw.Draw(img)

    def xy(x, y):
        return L + x * S, H - B - y * S

    g.rectangle([xy(0, 1), xy(1, 0)], outline="black")
    for t in np.linspace(0, 1, 6):
        g.line([xy(t, 0), (xy(t, 0)[0], xy(t, 0)[1] + 5)], fill="black")
        g.text((xy(t, 0)[0] - 8, xy(t, 0)[1] + 8), f"{t:.1f}", fill="black")
        g.text((L - 30, xy(0, t)[1] - 6), f"{t:.1f}", fill="black")
    g.line([xy(0, 0), xy(1, 1)], fill=(160, 160, 160), width=1)
    g.text((L + 90, H - B + 26), "confidence of the chosen option (held-out folds), 10 bins", fill="black")
    g.text((8, 8), "share correct", fill="black")
    colours = [(200, 60, 60), (60, 110, 200), (40, 150, 70), (150, 80, 170)]
    edges = np.linspace(0, 1, 11)
    for k, (name, (conf, ok)) in enumerate(curves.items()):
        col = colours[k % len(colours)]
        idx = np.clip(np.digitize(conf, edges[1:-1]), 0, 9)
        pts = [xy(conf[idx == b].mean(), ok[idx == b].mean()) for b in range(10) if (idx == b).sum()]
        if len(pts) > 1:
            g.line(pts, fill=col, width=2)
        for px, py in pts:
            g.ellipse([px - 4, py - 4, px + 4, py + 4], fill=col)
        g.text((L, H - B + 46 + 16 * k), f"{name}: ECE {scoring.ece(conf, ok):.3f} (one split)", fill=col)
    img.save(path)


def flag_eval(present: list[dict], absent: list[dict], names: list[str] = FLAG) -> dict:
    recs = [(r["flag"], 0, r["gold"]["doc"]) for r in present] + [(r["flag"], 1, r["gold"]["doc"]) for r in absent]
    X = np.array([[f[n] for n in names] for f, _, _ in recs])
    y = np.array([t for _, t, _ in recs])
    g = [d for _, _, d in recs]
    single = {n: auc(-X[y == 1, j], -X[y == 0, j]) for j, n in enumerate(names)}  # low value = absent
    single["rare_absent"] = auc(X[y == 1, names.index("rare_absent")], X[y == 0, names.index("rare_absent")])
    aucs, rates = [], []
    oof = np.zeros(len(y))
    for r in range(REPEATS):
        for test in grouped_folds(g, FOLDS, r):
            train = np.setdiff1d(np.arange(len(y)), test)
            m = fit_logistic(X[train], y[train], names)
            oof[test] = predict_logistic(m, X[test])
            # fires when absent is the likelier (balanced training classes: p > 0.5)
            rates.append(((oof[test][y[test] == 0] > THRESHOLD).mean(), (oof[test][y[test] == 1] > THRESHOLD).mean(),
                          len(test)))
        aucs.append(auc(oof[y == 1], oof[y == 0]))
    w = np.array([x[2] for x in rates], dtype=float)
    final = fit_logistic(X, y, names)
    final["threshold"] = THRESHOLD
    return {"auc": float(np.mean(aucs)), "single": single, "final": final, "n_present": int((y == 0).sum()),
            "n_absent": int((y == 1).sum()),
            "rate_present": float(np.average([x[0] for x in rates], weights=w)),
            "rate_absent": float(np.average([x[1] for x in rates], weights=w))}


def fit_logistic(X, y, names: list[str] = FLAG, l2=1.0, iters=50) -> dict:
    m, s = X.mean(axis=0), X.std(axis=0) + 1e-9
    Z = np.hstack([(X - m) / s, np.ones((len(X), 1))])
    w = np.zeros(Z.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-Z @ w))
        reg = l2 * np.r_[w[:-1], 0]
        g = Z.T @ (y - p) - reg
        H = -(Z * (p * (1 - p))[:, None]).T @ Z - l2 * np.diag(np.r_[np.ones(len(w) - 1), 0])
        step = np.linalg.solve(H, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return {"features": names, "mean": m.tolist(), "scale": s.tolist(), "weights": w[:-1].tolist(), "bias": float(w[-1])}


def predict_logistic(m, X) -> np.ndarray:
    return 1 / (1 + np.exp(-(((X - np.asarray(m["mean"])) / np.asarray(m["scale"])) @ np.asarray(m["weights"])
                             + m["bias"])))


def run(args) -> None:
    questions = {q.qid: q for q in read_questions(args.questions.read_bytes())[0]}
    from bench.answer_quality import read_features

    base_need = ("option_mean", "neutral_sum", "support_cov")
    every = [r for r in read_features(args.data_dir) if all(k in r for k in base_need)]
    # letter/verify were measured on a part of the questions only when the run left them out: a scorer is
    # evaluated only on records that have all of its features, and a subset is never mixed into the table
    extra = {"letter_pos": len([r for r in every if "letter_pos" in r]), "verify": len([r for r in every if "verify" in r])}
    recs = every
    db = sqlite3.connect(args.data_dir / "full" / "library.sqlite")
    n_pages = dict(db.execute("SELECT name, n_pages FROM documents").fetchall())
    d = Data(recs, questions, n_pages)
    have = set(cb.option_features(recs[0]))
    if extra["letter_pos"] < len(recs):
        have -= {"letter", "letter0"}
    if extra["verify"] < len(recs):
        have -= {"verify"}
    seconds = []
    for r in recs:
        s = dict(r["seconds"])
        s["n_shifts"] = len(r.get("letter_pos") or {}) or 1
        seconds.append(s)
    n = len(recs)
    rows, results = [], {}
    Zraw = np.stack([cb.matrix(r, ["option"])[:, 0] for r in recs])
    P02 = np.stack([cb.softmax_masked(z / 0.2, m) for z, m in zip(Zraw, d.M)])  # today's probabilities
    pred02 = P02.argmax(axis=1)
    ece02 = scoring.ece(P02.max(axis=1), (pred02 == d.y).astype(float))
    for name in [a for a in ALONE if a in have]:
        results[name] = evaluate_scorer(d, [name], False, seconds)
    for name, feats in COMBOS.items():
        if set(feats) <= have:
            results[name] = evaluate_scorer(d, feats, True, seconds)
    prefix = np.median([s["prefix"] for s in seconds])
    ratio = {g: float(np.median([s[g] for s in seconds if g in s]) / prefix)
             for g in ("retrieve", "support", "neutral", "option", "verify", "letter") if any(g in s for s in seconds)}
    # the default: the best cross-validated combination, if it beats the option scorer by more than one question
    base = results["option"]
    fits = {k: v for k, v in results.items() if k in COMBOS}
    default = max(fits, key=lambda k: (round(fits[k]["acc"] * n), -fits[k]["p50"])) if fits else None
    if default and (results[default]["acc"] - base["acc"]) * n <= 1.0:
        default = None
    # paired comparison with the option scorer (one split's held-out predictions): exact sign test on the
    # questions where exactly one of the two is right
    best = max(fits, key=lambda k: fits[k]["acc"]) if fits else None
    sign = None
    if best:
        a, b = results["option"]["right"], results[best]["right"]
        only_b, only_a = int((b & ~a).sum()), int((a & ~b).sum())
        sign = (best, only_b, only_a, sign_test(only_a, only_b))
    feats = COMBOS[default] if default else ["option"]
    all_idx = np.arange(n)
    model = fit_model(d, feats, all_idx, None, fit_weights=default is not None)
    absent_path = args.data_dir / "absent.jsonl"
    flag = None
    if absent_path.exists():
        both = [json.loads(x) for x in absent_path.read_text().splitlines() if x.strip()]
        flag = flag_eval([r for r in both if r["library"] == "full"], [r for r in both if r["library"] != "full"])
    out = {"features": feats, "mean": list(map(float, model["mean"])), "scale": list(map(float, model["scale"])),
           "weights": list(map(float, model["weights"])), "temperature": model["temperature"],
           "letter_prior": model["letter_prior"], "shifts": [0], **({"flag": flag["final"]} if flag else {})}
    args.weights.parent.mkdir(parents=True, exist_ok=True)
    args.weights.write_text(json.dumps({"models": out, "data": f"{n} questions of {args.questions}",
                                        "command": f"python -m bench.answer_quality {args.argv}",
                                        "date": str(args.date)}, indent=1) + "\n")  # python -m fit ships it
    # the diagram: today's option scorer (T = 0.2), its CV temperature, and the default
    curves = {"option, T=0.2 (today)": (P02.max(axis=1), (pred02 == d.y).astype(float))}
    for k in ["option"] + ([default] if default else []):
        P = results[k]["P"]
        pr = P.argmax(axis=1)
        curves[f"{k}, CV temperature"] = (P.max(axis=1), (pr == d.y).astype(float))
    png = args.out.with_name("answer_quality_reliability.png")
    reliability_png(png, curves)
    chosen = results[default or "option"]
    option_T = fit_model(d, ["option"], all_idx, None, fit_weights=False)["temperature"]
    lines = [f"# Answer quality — {args.date}, {args.machine}, {args.cpus} cores", "",
             f"Written by `python -m bench.answer_quality {args.argv}` from `{args.data_dir}/features*.jsonl`: "
             f"{n} questions over the library of all {len(n_pages)} PDFs, the default pipeline's retrieval and two "
             "passages, answer model Qwen2.5-Coder-1.5B Q4_K_M. Accuracy and score are cross-validated: 5 folds "
             f"grouped by document (Doc_ID), {REPEATS} random splits averaged for fitted rows; a single scorer has no "
             "weights, only its temperature fitted (nested, on the training folds). 95% interval: Wilson, n = "
             f"{n}. ECE: 10 bins, held-out folds. s/question p50: retrieval + shared prefix + the feature groups the "
             "scorer needs, each group timed apart in the features run (the pipeline's own p50 is measured by "
             "`python -m pipeline.evaluate`, see below).", "",
             "| scorer | answer acc (95% CI) | score | ECE | s/question p50 |", "|---|---|---|---|---|",
             f"| option, softmax T=0.2 (before) | {d.score(pred02)['acc']:.3f} | {d.score(pred02)['score']:.3f} "
             f"| {ece02:.3f} | {base['p50']:.1f} |"]
    for k, v in results.items():
        lo, hi = wilson(v["acc"], n)
        mark = (" **(cpu default)**" if k == "option" else "") + (" *(scorer=calibrated)*" if k == default else "")
        lines.append(f"| {k}{' (fitted)' if k in COMBOS else ''}{mark} | {v['acc']:.3f} ({lo:.3f}–{hi:.3f}) "
                     f"| {v['score']:.3f} | {v['ece']:.3f} | {v['p50']:.1f} |")
    lines += ["", "Cost of each feature group relative to the shared prefix (median seconds ratio, same run): "
              + ", ".join(f"{g} {r:.2f}" for g, r in ratio.items()) + f"; prefix median {prefix:.1f} s.",
              "", f"Fitted default: {default or 'option scorer with a calibrated temperature'}; features "
              f"{feats}, weights {np.round(model['weights'], 3).tolist()}, temperature {model['temperature']:.3f} "
              f"(`{args.weights.name}`). Rule: the combination with the most cross-validated right answers, "
              "if it is more than one question ahead of the option scorer. "
              + (f"Paired with the option scorer (one split), {sign[0]} is right on {sign[1]} questions the option "
                 f"scorer misses and wrong on {sign[2]} it gets (sign test p = {sign[3]:.2f}). " if sign else "")
              + f"The option scorer alone, its temperature fitted the same way on all {n}: "
              f"T = {option_T:.3f} (the cpu profile's `option_temperature`). "
              f"Reliability diagram: [{png.name}]({png.name})."]
    if extra["letter_pos"] < n or extra["verify"] < n:
        lines += ["", f"Not in the table: the letter scorer (with and without its position prior) and per-option "
                  f"verification, measured on {extra['letter_pos']} and {extra['verify']} questions only (the "
                  "170-question run left them out for time: on those questions they cost "
                  + ", ".join(f"{g} {ratio[g]:.2f}" for g in ("letter", "verify") if g in ratio)
                  + " of the prefix each, too slow for the p50 bar on top of the option scorer)."]
    if flag:
        lines += ["", "## Not in your documents", "",
                  f"`python -m bench.answer_quality absent ...`: {flag['n_present']} questions asked of the full library "
                  f"and {flag['n_absent']} asked of a library "
                  f"without their gold document (the library's {len(n_pages)} documents split in two halves by a hash of the name; each "
                  "question asked of the half that lacks its document). Retrieval-only features, logistic model, "
                  f"5-fold CV grouped by document, {REPEATS} splits.", "",
                  f"- ROC AUC (held-out): **{flag['auc']:.3f}**",
                  f"- flag rate (fires when p(absent) > {THRESHOLD}; held-out): "
                  f"present {flag['rate_present']:.3f}, absent {flag['rate_absent']:.3f}",
                  "- single-feature AUC (no fit): " + ", ".join(f"{k} {v:.3f}" for k, v in flag["single"].items())]

    def bar(ok):
        return "met" if ok else "**not met**"

    opt = results["option"]
    lines += ["", "## Bars (issue 10)", "",
              "The cpu profile answers with the option scorer at the fitted temperature (same cost as before; "
              f"`scorer=calibrated` adds the fitted combination: {chosen['acc']:.3f} / {chosen['score']:.3f} / ECE "
              f"{chosen['ece']:.3f}, not significantly better, and slower).", "",
              f"- answer accuracy ≥ 0.78: {opt['acc']:.3f} ({bar(opt['acc'] >= 0.78)}); "
              f"score ≥ 0.87: {opt['score']:.3f} ({bar(opt['score'] >= 0.87)}).",
              f"- ECE ≤ 0.05: {opt['ece']:.3f} held-out ({bar(opt['ece'] <= 0.05)}); before (T = 0.2): {ece02:.3f}.",
              (f"- not-in-documents AUC ≥ 0.85: {flag['auc']:.3f} ({bar(flag['auc'] >= 0.85)})." if flag
               else "- not-in-documents AUC: `absent` not run.")]
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)


# ---- pipeline runs compared: ``python -m bench.answer_quality runs --run DIR --run DIR ...`` ----------------
def run_table(runs: list[Path], questions: dict, curves: dict | None = None) -> str:
    """Each ``pipeline.evaluate`` run (its trace.jsonl and metrics.json) on the same questions: answer accuracy
    with its Wilson interval, score, ECE of the probabilities it showed (with the ECE a perfectly calibrated
    answerer would show by chance, and the p-value of the observed one against it), held-out
    ECE after a temperature fitted on the other documents' questions (5 folds grouped by document, 3 splits),
    p50, and the paired comparison with the first run (exact sign test). ``curves`` (if given) receives each
    run's held-out confidence and correctness (first split) for :func:`reliability_png`."""
    first = None
    lines = ["| run | n | answer acc (95% CI) | score | doc acc | page prox | ECE as shown (if calibrated: by chance; p) "
             "| ECE, T refit held-out (T on all) | p50 s | vs first: right only here / only there (sign p) |",
             "|" + "---|" * 10]
    for run in runs:
        traces = {t["Question_ID"]: t for t in map(json.loads, (run / "trace.jsonl").read_text().splitlines())
                  if t.get("answer") and "error" not in t}
        metrics = json.loads((run / "metrics.json").read_text())
        qids = [k for k in traces if k in questions and questions[k].gold_answer]
        qs = [questions[k] for k in qids]
        M = np.stack([cb.option_mask(q.options) for q in qs])
        y = np.array([LETTERS.index(q.gold_answer) for q in qs])
        P = np.array([[traces[k]["probabilities"].get(L, 0.0) for L in LETTERS] for k in qids])
        Z = np.where(M, np.log(np.clip(P, 1e-300, None)), -1e9)
        pred = np.array([int(np.argmax(z)) for z in Z])
        right = dict(zip(qids, pred == y))
        groups = [q.gold_doc for q in qs]
        eces = []
        for seed in range(3):
            Ph = np.zeros_like(P)
            for test in grouped_folds(groups, FOLDS, seed):
                train = np.setdiff1d(np.arange(len(qs)), test)
                T = cb.fit_temperature(Z[train], y[train], M[train])
                Ph[test] = [cb.softmax_masked(Z[i] / T, M[i]) for i in test]
            eces.append(scoring.ece(Ph.max(axis=1), (Ph.argmax(axis=1) == y).astype(float)))
            if seed == 0 and curves is not None:
                curves[f"{run.name}, T refit held-out"] = (Ph.max(axis=1), (Ph.argmax(axis=1) == y).astype(float))
        t_all = cb.fit_temperature(Z, y, M)
        conf, right_shown = P.max(axis=1), (pred == y).astype(float)
        shown = scoring.ece(conf, right_shown)
        chance, p_e = scoring.ece_by_chance(conf, right_shown)
        acc = float((pred == y).mean())
        lo, hi = wilson(acc, len(qs))
        if first is None:
            first, vs = right, "–"
        else:
            both = [k for k in right if k in first]
            here = sum(right[k] and not first[k] for k in both)
            there = sum(first[k] and not right[k] for k in both)
            vs = f"{here} / {there} (p = {sign_test(there, here):.2f})"
        lines.append(f"| {run.name} | {len(qs)} | {acc:.3f} ({lo:.3f}–{hi:.3f}) | {metrics.get('score', 0):.3f} "
                     f"| {metrics.get('doc_accuracy', 0):.3f} | {metrics.get('page_proximity', 0):.3f} "
                     f"| {shown:.3f} ({chance:.3f}; p = {p_e:.2f}) | {np.mean(eces):.3f} ({t_all:.2f}) "
                     f"| {metrics.get('p50_seconds', float('nan')):.1f} | {vs} |")
    return "\n".join(lines)


def runs(args) -> None:
    questions = {q.qid: q for q in read_questions(args.questions.read_bytes())[0]}
    curves: dict = {}
    print(run_table([Path(r) for r in args.run], questions, curves))
    if args.png:
        reliability_png(args.png, curves)
        print(f"reliability diagram: {args.png}")
