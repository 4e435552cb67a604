"""The not-in-documents flag's model: a small logistic regression, cross-validated by document.

Used by ``bench.flag`` (which fits the shipped flag models; ``python -m fit`` ships them) and by
``bench.freeform`` (which refits the free-form flag without each question's document)."""
from __future__ import annotations

import numpy as np

FOLDS, REPEATS = 5, 5  # 5-fold cross-validation grouped by document, 5 repeats
THRESHOLD = 0.5  # the flag fires when "absent" is the likelier of the two (the fit's classes are balanced)
FLAG = ["q_cov_idf", "rare_cov", "rare_absent", "dense_top", "opt_cov_max"]
FLAG_FREE = [n for n in FLAG if not n.startswith("opt_")]  # questions without options (retrieved by the question)


def grouped_folds(groups: list[str], k: int, seed: int) -> list[np.ndarray]:
    """``k`` folds of row indices, every group (document) in one fold; the groups shuffled by ``seed``."""
    uniq = sorted(set(groups))
    rng = np.random.default_rng(seed)
    rng.shuffle(uniq)
    fold_of = {g: i % k for i, g in enumerate(uniq)}
    f = np.array([fold_of[g] for g in groups])
    return [np.where(f == i)[0] for i in range(k) if (f == i).any()]


def fit_logistic(X, y, names: list[str] = FLAG, l2=1.0, iters=50) -> dict:
    """L2-regularised logistic regression on standardised features (Newton's method), as the shipped weights
    keep a flag model: features, mean, scale, weights, bias."""
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
