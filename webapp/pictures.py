"""The Evaluate tab's two pictures, drawn as inline SVG (no plotting library; every text escaped).

* :func:`reliability_svg` — the chosen option's probability against how often it was right, per bin, with the
  band a calibrated answerer would fall in by chance at that bin's size (binomial, 95%).
* :func:`loss_svg` — per group (all questions, then each gold document) the share of questions whose gold page
  was lost at each stage (``runs.STAGES``); each segment carries ``data-stage`` and ``data-doc``, so a click on it
  can filter the question table (:data:`CLICK_JS`).
"""
from __future__ import annotations

import html
import math

from . import runs as R

COLOURS = {R.NOT_RETRIEVED: "#b91c1c", R.BELOW_READ: "#f97316", R.PAGE_CHOICE: "#eab308",
           R.READ_WRONG: "#7c3aed", R.READ_RIGHT: "#16a34a", R.NOT_ASKED: "#9ca3af"}
# a click on a bar segment (or its legend entry) reports its stage and document to the server
CLICK_JS = ("element.addEventListener('click', (e) => { const b = e.target.closest('[data-stage]'); "
            "if (b) trigger('click', {stage: b.dataset.stage, doc: b.dataset.doc || ''}); });")


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def band(conf: float, n: int) -> tuple[float, float]:
    """Where the accuracy of ``n`` answers shown at ``conf`` falls 95% of the time if the numbers are right."""
    half = 1.96 * math.sqrt(max(conf * (1 - conf), 1e-9) / n)
    return max(0.0, conf - half), min(1.0, conf + half)


DOT_MAX = 8  # px: the largest dot's radius; the frame leaves that much room around 0% and 100%


def reliability_svg(bins: list[dict], m: dict, title: str = "", w: int = 360, h: int = 300) -> str:
    """The reliability diagram of one run (``bins``: ``runs.reliability``; ``m``: its metrics, for the ECE)."""
    if not bins:
        return f'<div class="pdfqa-pic">{_e(title)}: no answered question with a gold answer to draw.</div>'
    pad = DOT_MAX + 1  # the frame is drawn this far outside the plot area, so a dot at 0% or 100% stays inside it
    x0, y0, pw, ph = 44 + pad, 4 + pad, w - 60 - 2 * pad, h - 80 - 2 * pad  # below it: ticks, axis name, ECE
    X = lambda v: x0 + v * pw  # noqa: E731
    Y = lambda v: y0 + (1 - v) * ph  # noqa: E731
    parts = [f'<rect class="frame" x="{x0 - pad}" y="{y0 - pad}" width="{pw + 2 * pad}" height="{ph + 2 * pad}" '
             'fill="#fff" stroke="#999"/>']
    for v in (0, .25, .5, .75, 1):
        parts.append(f'<text x="{X(v):.0f}" y="{y0 + ph + pad + 14}" font-size="10" text-anchor="middle">{v:.0%}'
                     f'</text><text x="{x0 - pad - 4}" y="{Y(v) + 3:.0f}" font-size="10" text-anchor="end">{v:.0%}'
                     '</text>')
    for b in bins:
        lo, hi = band(b["conf"], b["n"])
        parts.append(f'<rect class="chance-band" x="{X(b["lo"]) + 1:.1f}" y="{Y(hi):.1f}" width="{pw / 10 - 2:.1f}" '
                     f'height="{max(1.0, Y(lo) - Y(hi)):.1f}" fill="#cbd5e1"/>')
    parts.append(f'<line x1="{X(0)}" y1="{Y(0)}" x2="{X(1)}" y2="{Y(1)}" stroke="#64748b" stroke-dasharray="4 3"/>')
    for b in bins:
        r = 3 + (DOT_MAX - 3) * math.sqrt(b["n"] / max(x["n"] for x in bins))
        parts.append(f'<circle class="bin" cx="{X(b["conf"]):.1f}" cy="{Y(b["acc"]):.1f}" r="{r:.1f}" fill="#f97316" '
                     f'stroke="#7c2d12"><title>shown {b["lo"]:.0%}–{b["hi"]:.0%}: right {b["right"]} of {b["n"]} '
                     f'(mean shown {b["conf"]:.0%})</title></circle>')
    parts.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + pad + 32}" font-size="11" text-anchor="middle">probability '
                 f'shown for the chosen option</text><text transform="translate(12 {y0 + ph / 2}) rotate(-90)" '
                 'font-size="11" text-anchor="middle">share right</text>')
    ece = (f"ECE {m['ece']:.3f}; a calibrated answerer: {m['ece_chance']:.3f} by chance" if "ece" in m else "")
    parts.append(f'<text x="{x0}" y="{h - 8}" font-size="11">{_e(ece)}</text>')
    return (f'<div class="pdfqa-pic"><b>{_e(title or "Probabilities against answers")}</b><br>'
            f'<svg class="reliability" role="img" width="{w}" height="{h}" viewBox="0 0 {w} {h}">{"".join(parts)}'
            '</svg><div style="font-size:12px;margin-bottom:14px">Dots: each bin of answers (size = how many); grey: where a bin lands '
            '95% of the time if the probabilities are right; dashed: shown = right.</div></div>')


def _legend(counts: dict[str, int]) -> str:
    items = [f'<span data-stage="{_e(s)}" data-doc="" style="cursor:pointer;margin-right:10px;white-space:nowrap">'
             f'<span style="display:inline-block;width:10px;height:10px;background:{COLOURS[s]}"></span> '
             f'{_e(s)} ({counts.get(s, 0)})</span>' for s in R.STAGES]
    return f'<div style="font-size:12px;line-height:1.6">{"".join(items)}</div>'


# the labels' font (11 px): a rough width per letter, wide for capitals (a title in capitals, «ФІПЕРАЦИЛІН …», is
# much wider than its length says), so a label is cut to fit its column and its first letters never fall off the left
CHAR_PX = {"upper": 8.6, "lower": 6.8, "space": 3.8, "other": 7.0}


def text_px(text: str) -> float:
    """About how wide ``text`` is drawn at 11 px (an over-estimate for most fonts)."""
    def kind(c: str) -> str:
        return "space" if c.isspace() else "upper" if c.isupper() else "lower" if c.islower() else "other"
    return sum(CHAR_PX[kind(c)] for c in text)


def fit_label(text: str, px: float) -> str:
    """``text`` cut (with "…") to about ``px`` pixels wide."""
    if text_px(text) <= px:
        return text
    while text and text_px(text + "…") > px:
        text = text[:-1]
    return text.rstrip() + "…"


def loss_svg(groups: list[dict], title: str = "", w: int = 560, label_w: int = 190) -> str:
    """Where the gold page was lost (``groups``: ``runs.loss_groups``): one stacked bar per group, shares of its
    questions per stage; a segment's tooltip gives the count."""
    if not groups:
        return f'<div class="pdfqa-pic">{_e(title)}: no question with a gold page to draw.</div>'
    row, bw = 24, w - label_w - 40
    h = row * len(groups) + 8
    parts = []
    for i, g in enumerate(groups):
        y = 4 + i * row
        # from the left edge, cut to fit its column: its first letters are always shown (a label anchored at its
        # right end lost them off the left when it ran wider than estimated)
        name = fit_label(g["group"], label_w - 12)
        parts.append(f'<text class="loss-label" x="2" y="{y + 15}" font-size="11">{_e(name)}<title>'
                     f'{_e(g["group"])}</title></text>')
        x = float(label_w)
        for s in R.STAGES:
            k = g["counts"].get(s, 0)
            if not k:
                continue
            wd = bw * k / g["n"]
            parts.append(f'<rect class="loss-bar" data-stage="{_e(s)}" data-doc="{_e(g["doc"])}" x="{x:.1f}" '
                         f'y="{y}" width="{wd:.1f}" height="{row - 6}" fill="{COLOURS[s]}" style="cursor:pointer">'
                         f'<title>{_e(g["group"])}: {_e(s)} — {k} of {g["n"]}</title></rect>')
            x += wd
        parts.append(f'<text x="{label_w + bw + 4}" y="{y + 15}" font-size="11">{g["n"]}</text>')
    return (f'<div class="pdfqa-pic"><b>{_e(title or "Where the gold page was lost")}</b> '
            '<span style="font-size:12px">(click a bar to list its questions)</span>'
            f'{_legend(groups[0]["counts"])}<svg class="loss" role="img" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}">{"".join(parts)}</svg></div>')


def run_pictures(run: dict, titles: dict[str, str], name: str = "") -> tuple[str, str]:
    """A saved run's reliability diagram and its gold-page losses (``run``: ``runs.load_run``)."""
    head = f"Run “{name}”: " if name else ""
    rel, lost = ("probabilities against answers", "where the gold page was lost") if name else \
        ("Probabilities against answers", "Where the gold page was lost")
    return (reliability_svg(R.reliability(run["traces"]), run["metrics"], head + rel),
            loss_svg(R.loss_groups(run["traces"], titles, questions=run.get("questions")), head + lost))


def side_by_side(left: str, right: str) -> str:
    return (f'<div style="display:flex;gap:16px;flex-wrap:wrap;margin-bottom:16px"><div style="flex:1;min-width:0">{left}</div>'
            f'<div style="flex:1;min-width:0">{right}</div></div>')
