"""Scoring functions of the evaluation: calibration error (and what chance alone gives) and free-form answers'
exact match and token F1 after normalisation."""
from __future__ import annotations

import re
import unicodedata
from collections import Counter

import numpy as np

from ..text import fold_homoglyphs


def ece(conf: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error of the top-1 confidence, equal-width bins."""
    conf, correct = np.asarray(conf, dtype=float), np.asarray(correct, dtype=float)
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(conf, edges[1:-1]), 0, bins - 1)
    return float(sum(abs(conf[idx == b].mean() - correct[idx == b].mean()) * (idx == b).mean()
                     for b in range(bins) if (idx == b).any()))


def ece_by_chance(conf: np.ndarray, correct: np.ndarray, n_sim: int = 1000, seed: int = 0) -> tuple[float, float]:
    """What :func:`ece` a perfectly calibrated answerer would show by chance at these confidences on this many
    questions (each answer right with exactly its confidence; ``n_sim`` draws, fixed seed), and the share of
    those draws whose ECE is at least the observed one (a p-value: small means the probabilities are off).
    On 170 questions the chance ECE is about 0.06, so an ECE below that cannot show anything wrong."""
    conf, correct = np.asarray(conf, dtype=float), np.asarray(correct, dtype=float)
    rng = np.random.default_rng(seed)
    draws = np.array([ece(conf, (rng.random(len(conf)) < conf).astype(float)) for _ in range(n_sim)])
    return float(draws.mean()), float((draws >= ece(conf, correct) - 1e-12).mean())


# ---- free-form answers ----------------------------------------------------------------------------
_APOS = re.compile(r"[’'ʼ`‘]")


def norm_answer(text: str) -> str:
    """Lower case, apostrophes unified (and dropped), Latin look-alikes in Cyrillic words made Cyrillic,
    punctuation to spaces, whitespace collapsed."""
    t = fold_homoglyphs(unicodedata.normalize("NFC", text or "")).lower()
    t = _APOS.sub("", t)
    t = "".join(" " if unicodedata.category(ch).startswith(("P", "S")) else ch for ch in t)
    return " ".join(t.split())


def exact_match(pred: str, gold: str) -> float:
    return float(norm_answer(pred) == norm_answer(gold))


def token_f1(pred: str, gold: str) -> float:
    p, g = norm_answer(pred).split(), norm_answer(gold).split()
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    if not common:
        return 0.0
    prec, rec = common / len(p), common / len(g)
    return 2 * prec * rec / (prec + rec)
