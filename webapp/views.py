"""Turning pipeline results into what the UI shows: plain tables, data frames, escaped text, images.

Nothing here renders text from a PDF as HTML: tables hold plain strings, and
every string put into Markdown goes through :func:`md_escape`.
"""
from __future__ import annotations

import html
import logging
import queue
import re
import threading
from typing import Any, Callable, Iterator

import pandas as pd

from pipeline.answering.answer import evidence_page
from pipeline.documents.ingest import safe_name
from pipeline.evaluation.questions import NONE
from pipeline.types import LETTERS, Answer, Question

log = logging.getLogger(__name__)

_MD_SPECIAL = set("\\`*_{}[]()#+-.!|~$<>&=:\"'")


def md_escape(text: object, limit: int | None = None) -> str:
    """Text made inert for Markdown (and the HTML it becomes): one line, specials escaped."""
    s = " ".join(str(text if text is not None else "").split())
    if limit and len(s) > limit:
        s = s[: limit - 1] + "…"
    out = []
    for ch in s:
        if ch == "<":
            out.append("&lt;")
        elif ch == ">":
            out.append("&gt;")
        elif ch == "&":
            out.append("&amp;")
        elif ch in _MD_SPECIAL:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def clip(text: str, n: int = 300) -> str:
    """One line of at most ``n`` characters, cut at a word boundary."""
    s = " ".join((text or "").split())
    if len(s) <= n:
        return s
    cut = s[: n - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut[n // 2:] else cut) + "…"


_MD_MARKS = re.compile(r"(^|\s)#{1,6}\s+|\*\*|__|(?<!\w)[_*](?=\S)|(?<=\S)[_*](?!\w)")
# the formatting tags the PDF parser writes into chunk Markdown (underline, sub/superscript, line breaks); any
# other tag-like text (a PDF's "<img …>") is the document's own text and stays
_FORMAT_TAGS = re.compile(r"</?(u|b|i|s|em|strong|sup|sub|br|span|mark)\s*/?>", re.IGNORECASE)


def plain(text: str) -> str:
    """Chunk Markdown as plain reading text: heading marks, bold/italic markers and formatting tags dropped."""
    return _MD_MARKS.sub(lambda m: m.group(1) or "", _FORMAT_TAGS.sub("", text or ""))


# ---- streaming work from a thread ------------------------------------------------
def stream(work: Callable[[Callable[..., None]], Any], tick: float | None = None) -> Iterator[tuple[str, Any]]:
    """Run ``work(report)`` in a thread; yield ``("progress", args)`` for each ``report(*args)``,
    then ``("done", result)`` or ``("error", exception)``; with ``tick``, also ``("tick", None)`` after
    each ``tick`` seconds without news (so a clock can move)."""
    q: queue.Queue = queue.Queue()

    def target():
        try:
            q.put(("done", work(lambda *a: q.put(("progress", a)))))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            q.put(("error", e))

    threading.Thread(target=target, daemon=True, name="pdfqa-work").start()
    while True:
        try:
            kind, value = q.get(timeout=tick)
        except queue.Empty:
            yield "tick", None
            continue
        yield kind, value
        if kind != "progress":
            return


# ---- library ---------------------------------------------------------------------
STATUS_COLUMNS = ["File", "Status", "Details"]
DOC_COLUMNS = ["Document", "State", "Pages", "Chunks", "Warnings"]
STAGES = {"parse": "parsing", "chunk": "chunking", "embed": "embedding", "store": "storing",
          "searchable": "searchable", "indexed": "indexed"}


def stage_text(stage: str, fraction: float) -> str:
    return f"{STAGES.get(stage, stage)} {round(100 * max(0.0, min(1.0, fraction)))}%"


def failed_text(traces: list[dict]) -> str:
    """", 2 failed (answer server … did not answer within 60 s)" for a run's failed questions, or ""."""
    errors = [t["error"] for t in traces if t.get("error")]
    if not errors:
        return ""
    return f", {len(errors)} failed ({md_escape(errors[0], 300)}{'; …' if len(set(errors)) > 1 else ''})"


def failure_text(name: str, err: Exception) -> str:
    """A failure in plain words, without the file name the message starts with."""
    msg = str(err)
    for prefix in (f"{name}: ", f"{safe_name(name)}: "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    return msg


def doc_label(title: str | None, name: str | None) -> str:
    """"title — file.pdf" (plain text: escape it before Markdown), or the file name when there is no title."""
    name = name or ""
    title = " ".join((title or "").split())
    return f"{title} — {name}" if title and title != name else name


_HASHED = re.compile(r"^([0-9a-f]{8})[0-9a-f]{8,}(\.\w+)?$", re.IGNORECASE)


def short_name(name: str | None) -> str:
    """A file name for a narrow table cell: a hashed name ("1026d4282a0f….pdf", 44 characters without a
    break) cut to its first 8 hex digits so the cell does not break it mid-word; other names as they are."""
    m = _HASHED.match(name or "")
    return f"{m.group(1)}…{m.group(2) or ''}" if m else (name or "")


def titles_of(library) -> dict[str, str]:
    """File name → title for the library's documents."""
    return {d.name: getattr(d, "title", "") for d in library.documents()}


def doc_rows(docs) -> list[list]:
    return [[doc_label(getattr(d, "title", ""), short_name(d.name)), doc_state(d), d.n_pages, d.n_chunks,
             "; ".join(d.warnings)] for d in docs]


def doc_state(d) -> str:
    """"indexed", or "searchable (lexical; 40/120 chunks embedded)" while its vectors are computed."""
    return d.state if d.state == "indexed" else f"searchable (lexical; {d.n_embedded}/{d.n_chunks} chunks embedded)"


def doc_choices(docs) -> list[tuple[str, str]]:
    return [(f"{doc_label(getattr(d, 'title', ''), d.name)} ({d.n_pages} p.)", d.doc_hash) for d in docs]


# ---- ask ---------------------------------------------------------------------------
CANDIDATE_COLUMNS = ["Rank", "Document", "Pages", "Shown page", "To model", "rerank", "page", "fused", "dense",
                     "lexical", "option_dense", "option_lexical", "Text"]
# shares of the table's width (fixed pixels left the text column narrow with white space beside it at 1920 px),
# each wide enough at 1280 px for its header's longest word ("option_lexical"): a header is never broken mid-word.
# The Document column holds the long words of a title in capitals («АВТОМОБІЛЬНОГО», 17 capitals at most) whole, and
# its title is cut (CANDIDATE_TITLE_CHARS) so a row stays a few lines high
CANDIDATE_WIDTHS = ["4.5%", "14%", "5%", "5.5%", "5.5%", "5.5%", "5%", "5.5%", "5.5%", "6.5%", "10%", "11.5%",
                    "16%"]
CANDIDATE_TITLE_CHARS = 48
SCORE_KEYS = ["rerank", "page", "fused", "dense", "lexical", "option_dense", "option_lexical"]
CANDIDATE_TEXT_CHARS = 150  # a row stays three or four lines high: several candidates fit at 720 px


def probs_frame(probabilities: dict[str, float], series: str | None = None, options=None) -> pd.DataFrame:
    """The chart's rows: one per option (with ``options``, the question's, only the given ones)."""
    letters = given_letters(options) if options is not None else list(LETTERS)
    rows = {"option": letters, "probability": [float(probabilities.get(L, 0.0)) for L in letters]}
    if series:
        rows["scorer"] = [series] * len(letters)
    return pd.DataFrame(rows)


def given_letters(options) -> list[str]:
    return [L for L, o in zip(LETTERS, options) if (o or "").strip()]


def options_given_note(options) -> str:
    """For a question with fewer than six options: how many were given ("" for six)."""
    letters = given_letters(options)
    if len(letters) == len(LETTERS):
        return ""
    return f"{len(letters)} options given ({', '.join(letters)}): only these were scored."


# "probability" throughout, as the answer says it ("the model's probability that this answer is right"); the
# scorer that made the numbers in brackets (the chart's own label keeps the part before them)
PROBABILITY_TITLE = "Probability of each option"
SCORER_TITLES = {"option": f"{PROBABILITY_TITLE} (from its likelihood)",
                 "listed": f"{PROBABILITY_TITLE} (from its likelihood, all six options read first)",
                 "letter": f"{PROBABILITY_TITLE} (from its letter's probability)",
                 "combined": f"{PROBABILITY_TITLE} (letter and option likelihood combined)"}
WEAK_EVIDENCE = "⚠ The answer may not be in your documents"


def scorer_title(a: Answer | None, scorer: str = "") -> str:
    """The probability chart's title: which scorer produced the numbers (``scorer``: the settings' one, with
    which the answer was made), and whether the option's words found in the passages raised them."""
    title = SCORER_TITLES.get(scorer, PROBABILITY_TITLE)
    if a is not None and "listed_support" in (a.details.get("features") or {}):
        title = (title[:-1] + ", " if title.endswith(")") else title + " (") + \
            "raised by the option's words found in the passages)"
    return title


def chart_title(scorer: str = "") -> str:
    """The chart's own label: the scorer's name only, so it stays one line above the bars (a two-line label
    pushed the option letters out of the chart); :func:`scorer_title` says the rest beside the answer."""
    return SCORER_TITLES.get(scorer, PROBABILITY_TITLE).split(" (")[0]


def not_in_documents(a: Answer) -> bool:
    """Whether to warn that the answer may not be in the documents: the pipeline's fitted flag
    (``details["not_in_documents"]``, on every profile; ``pipeline.answering.flag``). Without it, no warning
    rather than a guess: the former rule on retrieval (top fused z-score ≤ 1), measured on real retrieval,
    caught almost none of the questions whose document was absent (``bench/flag.md``)."""
    return bool(a.details.get("not_in_documents"))


def lexical_only_note(details: dict, n_docs: int = 0) -> str:
    """"(lexical only for N documents still embedding: …)" and what the not-in-documents check rested on."""
    names = details.get("lexical_only_docs") or []
    if not names:
        return ""
    basis = (f"; whether the answer is in {your_documents(n_docs)} was judged on the words alone"
             if details.get("flag_basis") == "lexical" else "")
    return (f"\n(lexical only for {plural(len(names), 'document')} still embedding: "
            f"{md_escape(', '.join(names), 300)}{basis})")


def searched_text(details: dict, n_docs: int) -> str:
    """What was searched, in words: how many documents, and by what (words and meaning, or words alone)."""
    how = ("by their words alone (the check while documents are still embedding)"
           if details.get("flag_basis") == "lexical" else "by words and by meaning")
    return f"{plural(n_docs, 'document')} of your library, {how}"


def your_documents(n_docs: int) -> str:
    """The library in words: "this document" when it holds one, else "your documents" (one wording for the
    heading, the status line and the notes: a library of one never reads "your documents")."""
    return "this document" if n_docs == 1 else "your documents"


def not_found_title(n_docs: int) -> str:
    """"Not found in your documents", or "in this document" when the library holds one."""
    return f"Not found in {your_documents(n_docs)}"


def absent_text(details: dict, n_docs: int = 0) -> str:
    """Why the library seems not to hold the answer: the question's words no document holds (no form of them:
    ``flag_features``'s ``absent_words``, rarest first), or a weak match."""
    missing = (details.get("flag_features") or {}).get("absent_words") or []
    if missing:
        where = "nowhere in this document" if n_docs == 1 else "in no document here"
        return f"the question's words {md_escape(', '.join(f'«{w}»' for w in missing), 300)} occur {where}"
    return "the closest passages match the question weakly"


def not_found_markdown(q: Question, a: Answer, titles: dict[str, str] | None = None) -> str:
    """A six-option answer the flag fired on: "not found" first, with why and what was searched; the model's
    pick is named below as a guess from passages that do not seem to hold the answer, never as the result."""
    i = LETTERS.index(a.letter)
    p = a.probabilities.get(a.letter, 0.0)
    n_docs = len(titles or {}) or 1
    lines = [f"## {not_found_title(n_docs)}", f"No answer is given: {absent_text(a.details, n_docs)}.  ",
             f"Searched: {searched_text(a.details, n_docs)}.", "",
             f"*Not an answer:* the option the model leaned to over the closest passages was {a.letter}) "
             f"{md_escape(q.options[i], 200)} ({p:.0%}); the passages it read are shown below for checking."]
    if a.details.get("lexical_only_docs"):
        lines.append(lexical_only_note(a.details, n_docs))
    return "\n".join(lines)


def confidence_text(p: float, held: str = "") -> str:
    """The answer's probability in a demo audience's words, and how far such numbers have held (``held``)."""
    said = f"**The model's probability that this answer is right: {p:.0%}** (its estimate, not a guarantee)"
    return said + (f"  \n{held}" if held else "")


def answer_markdown(q: Question, a: Answer, titles: dict[str, str] | None = None, scorer: str = "",
                    held: str = "") -> str:
    """The answer: its letter and option, how likely it is right (``held``: how far such numbers have held), its
    document and page; "not found" instead when the pipeline's flag fired (:func:`not_found_markdown`)."""
    if not_in_documents(a):
        return not_found_markdown(q, a, titles)
    i = LETTERS.index(a.letter)
    p = a.probabilities.get(a.letter, 0.0)
    lines = [f"## Answer: {a.letter}", f"**{a.letter})** {md_escape(q.options[i], 400)}  ", confidence_text(p, held),
             ""]
    if note := options_given_note(q.options):
        lines[-1:-1] = [f"*{note}*"]
    if a.doc_name:
        label = doc_label((titles or {}).get(a.doc_name, ""), a.doc_name)
        lines.append(f"**Document:** {md_escape(label)} — **page {a.page}**")
    if a.details.get("retried"):
        lines.append("\n(the model was asked again with wider evidence)")
    if (first := a.details.get("read_first")) and first.get("enough"):
        raw = " before calibration" if a.details.get("calibration") else ""
        lines.append(f"\n(answered from the top passage alone: the model was sure enough there "
                     f"({first['probability']:.0%}{raw}) that the next passage was not read)")
    if a.details.get("lexical_only_docs"):
        lines.append(lexical_only_note(a.details, len(titles or {})))
    return "\n".join(lines)


def candidate_refs(q: Question, a: Answer, titles: dict[str, str] | None = None) -> list[dict]:
    """What selecting a candidate needs: its chunk, document and evidence page (plain data)."""
    return refs_for(a.candidates, {c.chunk.chunk_id for c in a.evidence}, lambda c: evidence_page(c, q, a.letter),
                    titles)


def refs_for(candidates, shown: set[str], page_of: Callable, titles: dict[str, str] | None = None) -> list[dict]:
    """:func:`candidate_refs` for any ranked candidates: ``shown`` = the chunk ids the model read,
    ``page_of(candidate)`` = the page to show for it."""
    refs = []
    for c in candidates:
        refs.append({"rank": c.rank, "chunk_id": c.chunk.chunk_id, "doc_hash": c.chunk.doc_hash,
                     "doc_name": c.chunk.doc_name, "title": (titles or {}).get(c.chunk.doc_name, ""),
                     "page": page_of(c), "pages": sorted(set(c.chunk.pages)), "evidence": c.chunk.chunk_id in shown,
                     "scores": {k: float(v) for k, v in c.scores.items() if isinstance(v, (int, float))},
                     "text": c.chunk.body})
    return refs


def candidate_rows(refs: list[dict]) -> list[list]:
    rows = []
    for r in refs:
        sc = r["scores"]
        title = clip(r.get("title", ""), CANDIDATE_TITLE_CHARS)
        rows.append([r["rank"], doc_label(title, short_name(r["doc_name"])), ", ".join(map(str, r["pages"])),
                     r["page"],
                     "yes" if r["evidence"] else "",
                     *[round(sc[k], 3) if k in sc else None for k in SCORE_KEYS],
                     clip(plain(r["text"]), CANDIDATE_TEXT_CHARS)])
    return rows


def why_markdown(q: Question, a: Answer, why: dict[str, list], k: int = 2) -> str:
    """"Why this answer": the ``k`` lines that support the chosen option most and, beside them, the runner-up's
    best lines that are not among them; when the runner-up has none of its own it gets no column (the same
    lines under both said nothing about why one won), and a sentence says so."""
    if not why:
        return ""
    (chosen, mine), *rest = [(L, _unique(lines)) for L, lines in why.items()]
    mine = mine[:k]
    seen = {(ln.page, ln.text) for ln in mine}
    cells = [(chosen, mine)]
    note = ""
    if rest:
        runner, theirs = rest[0]
        own = [ln for ln in theirs if (ln.page, ln.text) not in seen][:k]
        if own:
            cells.append((runner, own))
        else:
            note = (f" The runner-up, {runner}) {md_escape(q.options[LETTERS.index(runner)], 80)} "
                    f"({a.probabilities.get(runner, 0.0):.0%}), has no supporting line other than these.")
    heads, bodies = [], []
    for letter, lines in cells:
        heads.append(f"{letter}) {md_escape(q.options[LETTERS.index(letter)], 80)} — "
                     f"{a.probabilities.get(letter, 0.0):.0%}")
        bodies.append("<br>".join(f"p. {ln.page}: {md_escape(ln.text, 220)}" for ln in lines) or "no line supports it")
    what = "the chosen option and the runner-up" if len(cells) > 1 else "the chosen option"
    return (f"**Why this answer** (the evidence lines for {what}).{note}\n\n| " + " | ".join(heads) + " |\n|"
            + "---|" * len(cells) + "\n| " + " | ".join(bodies) + " |")


def _unique(lines: list) -> list:
    """Evidence lines without repeats (the same line on one page, found twice, is shown once)."""
    seen, out = set(), []
    for ln in lines:
        key = (ln.page, " ".join(str(ln.text).split()))
        if key not in seen:
            seen.add(key)
            out.append(ln)
    return out


def timing_rows(timings: dict[str, float]) -> list[list]:
    rows = [[k, round(float(v), 3)] for k, v in timings.items()]
    rows.append(["total", round(sum(float(v) for v in timings.values()), 3)])
    return rows


# ---- free-form answers (questions without options) ------------------------------
def free_answer_markdown(fa, titles: dict[str, str] | None = None) -> str:
    """A short answer with its document and page, or "not found" with the reasons (``pipeline.answering.freeform.FreeAnswer``)."""
    label = doc_label((titles or {}).get(fa.doc_name or "", ""), fa.doc_name) if fa.doc_name else ""
    if fa.abstained:
        why = "; ".join(fa.reasons) or "the passages do not hold an answer"
        read = "found" if fa.details.get("not_in_documents") else "it read"  # the flag abstains before reading
        return (f"## {not_found_title(len(titles or {}))}\nNo answer was given: {md_escape(why, 400)}.  \n"
                f"The closest passages {read} are shown (they are **not** an answer).")
    lines = ["## Answer", f"**{md_escape(fa.text, 600)}**  ", grounding_text(fa.grounding), ""]
    if fa.forced:
        lines[-1:-1] = ["*The model first said the passages hold no answer. The library does seem to hold this "
                        "question's document, so it was asked for its best answer from them: check it on the "
                        "highlighted page.*"]
    if label:
        lines.append(f"**Document:** {md_escape(label)} — **page {fa.page}**")
    if fa.details.get("lexical_only_docs"):
        lines.append(lexical_only_note(fa.details, len(titles or {})))
    return "\n".join(lines)


def draft_markdown(text: str) -> str:
    """The short answer while the model writes it: its whole words so far (the last may be half written), marked
    as not yet checked; "" before its first whole word."""
    whole = text.lstrip().strip("«»\"“”")
    if len(whole.split()) < 2:
        return ""
    words = whole.rsplit(None, 1)[0]
    return (f"## Answer (being written…)\n**{md_escape(words, 600)} …**  \n*Not checked yet: it is read against the "
            "passages once written.*")


def grounding_text(grounding: float) -> str:
    """What the share of the answer's words found in the passages says: where the words came from (copied,
    not made up), not whether the answer is right."""
    rest = " (the rest are the model's own wording)" if grounding < 0.999 else ""
    return (f"a short answer written by the model from the passages: {grounding:.0%} of its words are taken from "
            f"them{rest}. That shows where its words came from, not that it answers the question: check it on "
            "the highlighted page.")


def closest_markdown(fa, titles: dict[str, str] | None = None, n: int = 3) -> str:
    """For an abstention: the passages the model looked at, best first (empty after an answer)."""
    if not fa.abstained or not fa.closest:
        return ""
    rows = []
    for c in [c for c in fa.closest if c.scores.preceding_of is None][:n]:
        label = doc_label((titles or {}).get(c.chunk.doc_name, ""), c.chunk.doc_name)
        rows.append(f"- **{md_escape(label, 120)}**, p. {', '.join(map(str, sorted(set(c.chunk.pages))))}: "
                    f"{md_escape(clip(plain(c.chunk.body), 240))}")
    return "**The closest passages it looked at**\n\n" + "\n".join(rows)


# ---- option-order check -------------------------------------------------------------
ORDER_COLUMNS = ["Order shown", "Answer", *LETTERS]


def order_rows(check: dict) -> list[list]:
    return [[r["order"], r["answer"], *[round(r["probabilities"].get(L, 0.0), 3) for L in LETTERS]]
            for r in check["orders"]]


def order_markdown(check: dict, asked_probs: dict[str, float]) -> str:
    """The verdict: does the answer hold in every order, and how far the top probability moves."""
    rows = check["orders"]
    answers = [r["answer"] for r in rows]
    top = max(asked_probs, key=asked_probs.get) if asked_probs else answers[0]
    spread = [r["probabilities"].get(top, 0.0) for r in rows]
    if check["stable"]:
        head = f"**The answer holds:** {top} in all {len(rows)} orders"
    else:
        counts = {L: answers.count(L) for L in dict.fromkeys(answers)}
        head = ("**The answer changes with the order:** " +
                ", ".join(f"{L} in {plural(n, 'order')}" for L, n in counts.items()))
    shown = (f" (the answer above shows {asked_probs[top]:.0%} for {top}: the same score after the calibration "
             "that makes the shown probabilities hold)") if top in (asked_probs or {}) else ""
    return (f"{head}; p({top}) from {min(spread):.0%} to {max(spread):.0%}, the model's scores before "
            f"calibration{shown}. Each order shows the same passages; the first row is the order you gave.")


def picture(library, chunk_id: str | None, doc_hash: str | None, page: int | None):
    """A page image: ``page`` of ``doc_hash`` with ``chunk_id``'s words highlighted (if on that page)."""
    from pipeline.documents.render import evidence_image, render_page

    if doc_hash is None or page is None:
        return None
    if chunk_id:
        got = library.chunks([chunk_id])
        if got:
            return evidence_image(library, got[0], int(page))
    return render_page(library.pdf_path(doc_hash), int(page))


# ---- evaluate ------------------------------------------------------------------------
def duration(seconds: float) -> str:
    s = int(round(max(0.0, seconds)))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def time_left(done: int, total: int, elapsed: float, t_last: float) -> float | None:
    """Seconds left, from the questions done by ``t_last`` (when the last one ended): the questions to come at
    their mean time, less what the current one has run. It goes down while a question runs (never below the
    questions after it): a slow question does not make the estimate climb. None before the first question."""
    if not 0 < done < total:
        return None
    per = t_last / done
    return max(per * (total - done) - (elapsed - t_last), per * (total - done - 1))


def progress_html(done: int, total: int, elapsed: float, stage: str = "", left: float | None = None) -> str:
    """The Evaluate progress bar: questions done / total, time elapsed, time ``left`` (:func:`time_left`; None
    when there is nothing to estimate, e.g. a stopped or finished run) and the ``stage``."""
    if left is None or not 0 < done < total:
        left = ""
    elif round(left) >= 1:
        left = f" · about {duration(left)} left"
    else:  # the last question has run past the others' mean: no number of seconds is honest any more
        left = " · finishing the last question" if done == total - 1 else " · nearly done"
    pct = 100 * done / total if total else 0
    note = f" · {html.escape(stage)}" if stage else ""
    return (f'<div id="eval-progress-bar" role="progressbar" aria-valuemin="0" aria-valuemax="{total}" '
            f'aria-valuenow="{done}" style="border:1px solid #999;border-radius:6px;height:16px;overflow:hidden">'
            f'<div style="width:{pct:.1f}%;height:100%;background:#f97316"></div></div>'
            f'<div>{done} / {total} questions · {duration(elapsed)} elapsed{left}{note}</div>')


def metrics_markdown(m: dict, name: str, missing_note: str = "", not_asked: int = 0) -> str:
    """A run's metrics in words; ``not_asked``: questions a stopped run never asked (counted failed in ``m``,
    and wrong in the score, but named apart here; ``m``'s seconds are then of the asked questions only)."""
    n, failed = m.get("n_questions", 0), m.get("failed", 0) - not_asked
    head = f"{n} questions, {failed} failed"
    if not_asked:
        head = (f"{n} questions: stopped after {n - not_asked}, {not_asked} not asked (counted as wrong in the "
                f"score), {failed} failed")
    lines = [f"### Run {md_escape(name)}", head]
    if missing_note:
        lines += ["", f"**⚠ {md_escape(missing_note)}**"]
    if "score" in m:
        lines += ["", f"**Score: {m['score']:.3f}** = 0.5 × answer accuracy {m['answer_accuracy']:.3f} "
                      f"+ 0.25 × document accuracy {m['doc_accuracy']:.3f} "
                      f"+ 0.25 × page proximity {m['page_proximity']:.3f}"]
        if "ece" in m:
            said = (f"Probabilities: the chosen option's probability averaged {m['mean_confidence']:.0%} and it was "
                    f"right {m['answered_accuracy']:.0%} of the time")
            if m["calibration_n"] < 30:
                said += " (too few questions to judge their calibration)"
            else:
                verdict = "the probabilities are off" if m["ece_p"] < 0.05 else "no sign that they are off"
                said += (f"; calibration error (ECE, 10 bins) {m['ece']:.3f}, where a perfectly calibrated answerer "
                         f"would show {m['ece_chance']:.3f} by chance on these questions (p = {m['ece_p']:.2f}: "
                         f"{verdict})")
            lines += ["", said]
    elif "n_answerable" in m:  # a free-form run (questions without options)
        parts = []
        if m.get("n_answerable"):
            parts.append(f"**{m['n_answerable']} answerable: token F1 {m['f1']:.3f}**, exact match "
                         f"{m['exact_match']:.3f}, \"not found\" on {m['abstained_answerable']:.0%} of them")
            if "doc_accuracy" in m:
                parts.append(f"document accuracy {m['doc_accuracy']:.3f}, page accuracy {m['page_accuracy']:.3f}")
        if m.get("n_unanswerable"):
            parts.append(f"**{m['n_unanswerable']} unanswerable: \"not found\" on {m['abstention_recall']:.0%}** "
                         "(abstention recall)")
        if "abstention_precision" in m:
            parts.append(f"abstention precision {m['abstention_precision']:.3f} (of the \"not found\", how many "
                         "were unanswerable)")
        lines += ["", "Free-form questions: " + "; ".join(parts) + "."]
    else:
        lines.append("\nNo gold columns (Correct_Answer, Doc_ID, Page_Num): predictions only, no score.")
    if "p50_seconds" in m:
        p95 = f", p95 {m['p95_seconds']:.1f} s" if "p95_seconds" in m else ""
        lines.append(f"\nMedian {m['p50_seconds']:.1f} s per question{p95}")
    return "\n".join(lines)


# the score chart's bars with labels short enough not to overlap at 1280 px (recall and precision: of the
# "not found" answers, as the text beside the chart says)
FREE_PARTS = {"f1": "F1", "exact_match": "exact", "abstention_recall": "recall",
              "abstention_precision": "precision", "doc_accuracy": "document", "page_accuracy": "page"}
SIX_PARTS = {"score": "score", "answer_accuracy": "answer", "doc_accuracy": "document", "page_proximity": "page"}


def metrics_frame(m: dict) -> pd.DataFrame:
    parts = FREE_PARTS if "n_answerable" in m else SIX_PARTS
    keys = [k for k in parts if k in m]
    return pd.DataFrame({"part": [parts[k] for k in keys], "value": [float(m[k]) for k in keys]})


def compare_markdown(a: str, b: str, c: dict) -> str:
    """The comparison's summary (``c``: ``pipeline.evaluation.metric.compare_runs``): answers fixed and broken,
    flips listed, and the questions a stopped run did not ask counted apart (not as broken); two runs that share
    no question (a six-option run and a plain one, or two question sets) say so, not "0 fixed, 0 broken"."""
    if c.get("kinds"):
        return (f"Before = {md_escape(a)} ({c['kinds'][0]}), after = {md_escape(b)} ({c['kinds'][1]}): they share no "
                "question — a six-option run and a plain one are scored differently, so nothing is compared. "
                "Pick two runs of the same kind.")
    if not c.get("shared", 1):
        return (f"Before = {md_escape(a)}, after = {md_escape(b)}: they share no question (no Question_ID is in "
                "both), so no answer can be compared; only the scores are, below.")
    said = (f"Before = {md_escape(a)}, after = {md_escape(b)}: {c['fixed']} fixed (wrong before, right after), "
            f"{c['broken']} broken (right before, wrong after); {plural(len(c['flips']), 'flip')} of answer, "
            "document or page listed below")
    if c.get("not_asked"):
        n = len(c["not_asked"])
        said += (f". {plural(n, 'question')} one of the runs did not ask (it was stopped): not compared, not "
                 f"counted as broken ({md_escape(', '.join(c['not_asked']), 200)}); the scores count them as wrong")
    return said


TRACE_FIRST = ["Question_ID", "answer", "gold", "doc", "page", "gold_rank", "error", "probabilities", "timings",
               "seconds"]


def trace_for_display(rec: dict) -> dict:
    """The trace record with the summary keys first (the candidates, long, come last)."""
    out = {k: rec[k] for k in TRACE_FIRST if k in rec}
    out.update({k: v for k, v in rec.items() if k not in out and k != "candidates"})
    if "candidates" in rec:
        out["candidates"] = rec["candidates"]
    return out


def rank_rows(rec: dict) -> list[list]:
    ranks = rec.get("gold_rank") or {}
    return [[stage, r if r is not None else "not found"] for stage, r in ranks.items()]


def doc_hash_by_name(library, name: str | None) -> str | None:
    if not name:
        return None
    return next((d.doc_hash for d in library.documents() if d.name == name), None)


def trace_pages(library, rec: dict) -> tuple:
    """The predicted page (rank-1 chunk highlighted) and the gold page, each with its caption, shown side by
    side; a gold document not in the library or a gold page beyond it gets a caption that says so."""
    titles = titles_of(library)
    cands = rec.get("candidates") or []
    left = right = None
    left_label, right_label = "Predicted page: none", "Gold page: none (no gold)"
    pred_hash = doc_hash_by_name(library, rec.get("doc"))
    if pred_hash and rec.get("page"):
        left = picture(library, cands[0]["chunk_id"] if cands else None, pred_hash, rec["page"])
        left_label = f"Predicted: {doc_label(titles.get(rec['doc']), rec['doc'])}, page {rec['page']}"
    gold = rec.get("gold") or {}
    if gold.get("answer") == NONE:
        right_label = "Gold: not in these documents (no page)"
    if gold.get("doc"):
        gold_hash = doc_hash_by_name(library, gold["doc"])
        right_label = f"Gold: {doc_label(titles.get(gold['doc']), gold['doc'])}, page {gold.get('page')}"
        if gold_hash is None:
            right_label = f"Gold: {gold['doc']}, page {gold.get('page')} — this document is not in the library"
        elif gold.get("page"):
            on_page = next((c["chunk_id"] for c in cands if c["doc"] == gold["doc"] and gold["page"] in c["pages"]),
                           None)
            try:
                right = picture(library, on_page, gold_hash, gold["page"])
            except ValueError as e:  # a gold page beyond the document
                log.info("gold page not shown: %s", e)
                right_label += " — not in this document"
    return left, left_label, right, right_label
