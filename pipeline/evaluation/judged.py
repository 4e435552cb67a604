"""A library's judged questions: answers a person marked right or wrong, kept as that library's own test set.

One JSON file per library (:class:`JudgedQuestions`), written atomically (a temporary file, then renamed): a
crash leaves the old file or the new one, never half of one. A question is one record however often it is
judged: judging it again (another tab, a second look) replaces the judgement, last write wins, and the message
says so. A question is the same question when its text and options are (case and spacing aside).

What a judgement becomes in the two CSV formats ``python -m pipeline.evaluate`` reads:

* a question with options: the competition's format (``Question_ID, Question, A–F, Correct_Answer, Doc_ID,
  Page_Num``), scored by the competition's metric. Judged "not in these documents", it keeps its options, and its
  ``Correct_Answer`` is ``none`` (``questions.NONE``) with no document and no page: a six-option run counts it
  right when it says "not found" (its not-in-documents flag), as the Ask tab showed it (``metric.metrics``);
* a question without options: the free-form format (``Question_ID, Question, Answer, Doc_ID, Page_Num``;
  ``pipeline.evaluation.free``), the right short answer in ``Answer`` and an empty ``Answer`` (no document, no
  page) for "not in these documents", as that format writes an unanswerable question.

A judgement's verdict is on what the app showed, and it agrees with how a run scores that answer: "not in these
documents" judged on an answer shown as "not found" is a right answer (kept as right, whatever button saved it),
and "right" for an answer the app gave with a letter cannot make its right answer "not in these documents".

Both files also carry ``Judgement, Error_Kind, Note, Judged_At``, columns the readers of the command ignore
(as they ignore the competition's ``Domain`` and ``N_Pages``), so an exported file imports back whole.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterable

from ..errors import QuestionsError, UserError
from ..types import LETTERS, Question
from .free import GOLD as FREE_GOLD
from .free import REQUIRED as FREE_REQUIRED
from .free import is_free_form
from .metric import ABSTAINED, ANSWERED_UNANSWERABLE, WRONG_ANSWER, WRONG_DOC, WRONG_PAGE
from .questions import (GOLD, MAX_CELL, NONE, REQUIRED, _columns, _delimiter, _page, _short, decode, finish,
                        gold_answer, question_rows)

RIGHT, WRONG = "right", "wrong"
VERDICTS = (RIGHT, WRONG)  # an imported row's verdict is "" (its file may not say)
NOT_IN_DOCUMENTS = "not in these documents"
OTHER = "other"
ERROR_KINDS = [WRONG_ANSWER, WRONG_DOC, WRONG_PAGE, ABSTAINED, ANSWERED_UNANSWERABLE, OTHER]  # the runs' own names
FILE = "judged.json"
OPTIONS_CSV, FREE_CSV = "judged-questions.csv", "judged-questions-free.csv"
EXTRA = ["Judgement", "Error_Kind", "Note", "Judged_At"]
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


class JudgedError(UserError):
    """A judgement that cannot be kept as given; the message says why."""


def now_iso(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))


@dataclass(frozen=True)
class Shown:
    """What the app answered: the letter (or the short answer; "" when none), its document and page, the
    probability it showed for the letter, whether it said "not found in your documents", and when."""
    answer: str
    doc: str | None
    page: int | None
    probability: float | None
    not_found: bool
    at: str


def shown_of(answer, now: float | None = None) -> Shown:
    """The :class:`Shown` of a pipeline result: an ``Answer`` (six options; "not found" is its not-in-documents
    flag, as the Ask tab shows it) or a ``FreeAnswer`` (none; "not found" when it abstained)."""
    if hasattr(answer, "letter"):
        p = answer.probabilities.get(answer.letter)
        return Shown(answer.letter, answer.doc_name, answer.page, None if p is None else float(p),
                     bool(answer.details.get("not_in_documents")), now_iso(now))
    return Shown(answer.text, answer.doc_name, answer.page, None, bool(answer.abstained), now_iso(now))


@dataclass(frozen=True)
class Judged:
    """One judged question: the question (six options, "" where none; none at all for a plain question), the
    verdict on what the app answered, and the right answer — a letter, a short answer, or ``not_in_documents``
    — with its document and page."""
    qid: str
    question: str
    options: tuple[str, ...]
    verdict: str
    answer: str  # the right letter or short answer; "" when not_in_documents
    not_in_documents: bool
    doc: str | None
    page: int | None
    judged_at: str
    error_kind: str = ""
    note: str = ""
    shown: Shown | None = None  # None for a question imported from a CSV

    @property
    def free(self) -> bool:
        """Whether it runs in a free-form run: a question without options (one with options keeps them, judged
        "not in these documents" or not)."""
        return not any(self.options)

    @property
    def right_answer(self) -> str:
        """The right answer as a person reads it."""
        return NOT_IN_DOCUMENTS if self.not_in_documents else self.answer

    @property
    def csv_answer(self) -> str:
        """The right answer as its CSV writes it: a letter, the short answer, "" (free-form) or ``none``
        (six-option) for "not in these documents"."""
        return (NONE if not self.free else "") if self.not_in_documents else self.answer

    def question_for_run(self) -> Question:
        if self.free:
            return Question(self.qid, self.question, [], self.answer, self.doc, self.page)
        return Question(self.qid, self.question, list(self.options), self.csv_answer, self.doc, self.page)


@dataclass(frozen=True)
class Saved:
    record: Judged
    replaced: Judged | None  # the earlier judgement of the same question, now replaced
    message: str


@dataclass
class Imported:
    added: list[str] = field(default_factory=list)  # Question_IDs
    updated: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "line N (Question_ID x): why — skipped", and notes

    @property
    def message(self) -> str:
        return (f"{len(self.added)} added, {len(self.updated)} updated"
                + (f"; {len(self.problems)} note(s): " + "; ".join(self.problems[:5]) if self.problems else "."))


def _key(text: str, options: Iterable[str]) -> str:
    norm = lambda s: " ".join(s.split()).casefold()  # noqa: E731
    return "\x1f".join([norm(text), *(norm(o) for o in options)])


def left_out_reason(r: Judged, documents: Iterable[str]) -> str | None:
    """Why a judged question cannot run in this library (its right document is gone), or None."""
    if r.doc and r.doc not in set(documents):
        return f"document {r.doc} is no longer in the library"
    return None


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


class JudgedQuestions:
    """The judged questions of one library, in the JSON file ``path`` (created on the first judgement)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        with _LOCKS_LOCK:  # one lock per file for every instance in this process (two tabs: two calls)
            self._lock = _LOCKS.setdefault(str(self.path.resolve()), threading.Lock())

    # ---- the file ------------------------------------------------------------------------------------
    def _load(self) -> list[Judged]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return [Judged(**{**r, "options": tuple(r["options"]),
                              "shown": Shown(**r["shown"]) if r.get("shown") else None}) for r in data["questions"]]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError) as e:  # damaged: said, and never written over
            raise JudgedError(f"the judged questions of this library cannot be read ({self.path.name}: "
                              f"{type(e).__name__}: {e}); nothing was changed") from None

    def _save(self, records: list[Judged]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"version": 1, "questions": [asdict(r) for r in records]}, ensure_ascii=False, indent=1)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".judged-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a power cut
        finally:
            os.close(dir_fd)

    # ---- reading ---------------------------------------------------------------------------------------
    def list(self) -> list[Judged]:
        """Every judged question, the newest judgement first."""
        records = self._load()
        order = {id(r): i for i, r in enumerate(records)}
        return sorted(records, key=lambda r: (r.judged_at, order[id(r)]), reverse=True)

    def __len__(self) -> int:
        return len(self._load())

    def get(self, qid: str) -> Judged | None:
        return next((r for r in self._load() if r.qid == qid), None)

    def find(self, text: str, options: Iterable[str] = ()) -> Judged | None:
        """The judgement of this question, if it was judged (the Ask tab: show it under the answer)."""
        key = _key(text.strip(), _six(options))
        return next((r for r in self._load() if _key(r.question, r.options) == key), None)

    def judged_after(self, when: float) -> list[str]:
        """The Question_IDs judged after ``when`` (seconds since the epoch; a run's start): a run's table marks
        them, its gold being older than their judgement."""
        return [r.qid for r in self.list() if r.judged_at > now_iso(when)]

    # ---- judging -----------------------------------------------------------------------------------------
    def judge(self, question: str, options: Iterable[str], verdict: str, *, shown: Shown | None = None,
              answer: str | None = None, not_in_documents: bool = False, doc: str | None = None,
              page: int | None = None, error_kind: str = "", note: str = "", now: float | None = None) -> Saved:
        """Keep a judgement of the answer ``shown`` to ``question`` (with ``options``; none for a plain question).

        ``verdict`` "right": the right answer, document and page default to those shown (document and page may be
        given: the answer right, the page another); what was shown as "not found" judged right is "not in these
        documents". "wrong": give ``answer`` (a letter of a non-empty option, or the short answer) or
        ``not_in_documents``, and the right ``doc`` and ``page`` (they default to those shown). The same question
        judged before is replaced (last write wins; :attr:`Saved.message` says so). Raises :class:`JudgedError`."""
        text, opts = (question or "").strip(), _six(options)
        agreed = verdict == WRONG and not_in_documents and shown is not None and shown.not_found
        if agreed:
            verdict = RIGHT  # "not found" was shown, and it is not in these documents: the app was right
        r = _checked(text, opts, verdict, shown, answer, not_in_documents, doc, page, error_kind, note)
        with self._lock:
            records = self._load()
            key = _key(text, opts)
            old = next((x for x in records if _key(x.question, x.options) == key), None)
            qid = old.qid if old else _next_id(records)
            rec = replace(r, qid=qid, judged_at=now_iso(now))
            records = [x for x in records if x is not old] + [rec]  # the file in judgement order
            self._save(records)
            n = len(records)
        said = f"Judged {verdict}: the right answer is {_said(rec)}."
        if agreed:
            said += f" (The app said “not found”: {NOT_IN_DOCUMENTS} is what it answered, so it was right.)"
        if old:
            said += (f" This question was judged before ({old.verdict or 'imported'}, {_said(old)}, at "
                     f"{old.judged_at.replace('T', ' ').replace('Z', ' UTC')}): that judgement is replaced by this one.")
        else:
            said += f" Saved as {qid} ({n} judged question{'s' if n != 1 else ''} in this library)."
        return Saved(rec, old, said)

    def remove(self, qid: str) -> Judged | None:
        """Remove the judged question ``qid``; it is returned (None when there was none)."""
        with self._lock:
            records = self._load()
            gone = next((r for r in records if r.qid == qid), None)
            if gone is not None:
                self._save([r for r in records if r is not gone])
        return gone

    # ---- as a questions set ------------------------------------------------------------------------------
    def as_questions(self, documents: Iterable[str], free: bool = False) -> tuple[list[Question], list[str]]:
        """The questions to run in this library — with options (``free`` False; those judged "not in these
        documents" too, their gold answer ``none``) or free-form (True: without options) — oldest judgement first,
        and a note for each left out: "J003: document X is no longer in the library — left out". The pair is what
        Evaluate reads a CSV into (its questions and notes)."""
        docs = set(documents)
        run, left = [], []
        for r in self._load():
            if r.free != free:
                continue
            why = left_out_reason(r, docs)
            if why:
                left.append(f"{r.qid}: {why} — left out")
            else:
                run.append(r.question_for_run())
        return run, left

    # ---- CSV -----------------------------------------------------------------------------------------------
    def export_csv(self, free: bool = False) -> str:
        """The judged questions with options (or the free-form ones) as CSV text that ``python -m
        pipeline.evaluate`` reads as it is; a header only when there are none."""
        if free:
            fields, row = [*FREE_REQUIRED, *FREE_GOLD, *EXTRA], lambda r: {"Answer": r.csv_answer}
        else:
            fields = [*REQUIRED, *GOLD, *EXTRA]
            row = lambda r: {**dict(zip(LETTERS, r.options)), "Correct_Answer": r.csv_answer}  # noqa: E731
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        for r in sorted(self._load(), key=lambda r: r.judged_at):
            if r.free == free:
                w.writerow({"Question_ID": r.qid, "Question": r.question, **row(r), "Doc_ID": r.doc or "",
                            "Page_Num": r.page or "", "Judgement": r.verdict, "Error_Kind": r.error_kind,
                            "Note": r.note, "Judged_At": r.judged_at})
        return out.getvalue()

    def export_files(self, folder: Path | str) -> list[Path]:
        """Write :data:`OPTIONS_CSV` and :data:`FREE_CSV` (each only when it has a question) under ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for free, name in ((False, OPTIONS_CSV), (True, FREE_CSV)):
            if any(r.free == free for r in self._load()):
                (folder / name).write_text(self.export_csv(free), encoding="utf-8")
                written.append(folder / name)
        return written

    def import_csv(self, data: bytes | str, now: float | None = None) -> Imported:
        """Judged questions from a CSV in either format (an exported file, edited or not). A row with the
        Question_ID of a judged question, or the same question, updates it; a bad row is skipped with its line
        and why (:attr:`Imported.problems`); the good rows are kept. A file with no usable row raises
        :class:`~pipeline.errors.QuestionsError`."""
        rows, problems = _read_rows(data)
        report = Imported(problems=problems)
        with self._lock:
            records = self._load()
            for line, r in rows:
                old = next((x for x in records if x.qid == r.qid), None) or \
                    next((x for x in records if _key(x.question, x.options) == _key(r.question, r.options)), None)
                clash = next((x for x in records if x is not old
                              and _key(x.question, x.options) == _key(r.question, r.options)), None)
                if clash:
                    report.problems.append(f"line {line} (Question_ID {_short(r.qid)}): the same question as "
                                           f"{clash.qid} — skipped")
                    continue
                r = replace(r, judged_at=r.judged_at or now_iso(now), qid=old.qid if old else r.qid,
                            shown=old.shown if old else None)
                records = [r if x is old else x for x in records] if old else records + [r]
                (report.updated if old else report.added).append(r.qid)
            self._save(records)
        return report


# ---- checks ------------------------------------------------------------------------------------------------
def _six(options: Iterable[str]) -> tuple[str, ...]:
    opts = [(o or "").strip() for o in options]
    if len(opts) > 6:
        raise JudgedError("a question has at most six options, A–F")
    return tuple(opts + [""] * (6 - len(opts))) if any(opts) else ()


def _said(r: Judged) -> str:
    where = f" ({r.doc}, page {r.page})" if r.doc else ""
    return f"“{_short(r.right_answer, 60)}”{where}"


def _next_id(records: list[Judged]) -> str:
    taken = {r.qid for r in records}
    n = len(records) + 1
    while f"J{n:03d}" in taken:
        n += 1
    return f"J{n:03d}"


def _checked(text, opts, verdict, shown, answer, not_in, doc, page, error_kind, note) -> Judged:
    """The judgement as a record (no id, no time yet), or :class:`JudgedError` saying what is wrong."""
    if not text:
        raise JudgedError("there is no question to judge")
    if len(text) > MAX_CELL or len(note or "") > MAX_CELL:
        raise JudgedError(f"the question or the note is over {MAX_CELL} characters")
    if opts and sum(1 for o in opts if o) < 2:
        raise JudgedError("a question with options needs at least two; leave them all empty for a plain question")
    if verdict not in VERDICTS:
        raise JudgedError(f"a judgement is “right” or “wrong”, not {verdict!r}")
    if error_kind and error_kind not in ERROR_KINDS:
        raise JudgedError(f"unknown kind of error {error_kind!r}: one of {', '.join(ERROR_KINDS)}")
    if verdict == RIGHT:
        if shown is None:
            raise JudgedError("“right” needs the answer that was shown")
        if answer is None and not not_in:
            not_in, answer = shown.not_found, shown.answer
        elif not_in and not shown.not_found:
            raise JudgedError(f"“right”, but the app answered «{_short(shown.answer, 20)}», not “{NOT_IN_DOCUMENTS}”: "
                              "judge it wrong")
        elif opts and not shown.not_found and not not_in and (answer or "").strip().upper() != shown.answer:
            raise JudgedError(f"“right”, but the option given ({_short(answer, 20)}) is not the one shown "
                              f"({shown.answer})")
    elif answer is None and not not_in:
        raise JudgedError("“wrong” needs the right answer: " + ("an option" if opts else "a short answer")
                          + f", or “{NOT_IN_DOCUMENTS}”")
    answer = "" if not_in else (answer or "").strip()
    if not not_in:
        answer = _right_option(answer, opts) if opts else answer
        if not answer:
            raise JudgedError("the right answer is empty")
        if verdict == WRONG and shown and opts and not shown.not_found and answer == shown.answer:
            raise JudgedError(f"“wrong”, but the right option given is the one shown ({answer}): judge it right, "
                              "or pick another option")
        doc = (doc if doc is not None else shown.doc if shown else None) or None
        page = page if page is not None else shown.page if shown else None
        if opts and not doc:
            raise JudgedError("name the document that holds the right answer")
        if page is not None and (not isinstance(page, int) or page < 1):
            raise JudgedError(f"a page is a whole number from 1, not {page!r}")
    else:
        doc = page = None  # nothing in these documents: no document, no page
    return Judged("", text, opts, verdict, answer, not_in, doc, page, "", error_kind or "", (note or "").strip(),
                  shown)


def _right_option(letter: str, opts: tuple[str, ...]) -> str:
    letter = letter.strip().upper()
    if len(letter) != 1 or letter not in LETTERS:
        raise JudgedError(f"the right option is a letter A–F, not {_short(letter, 20)!r}")
    if not opts[LETTERS.index(letter)]:
        raise JudgedError(f"option {letter} is empty")
    return letter


# ---- import ------------------------------------------------------------------------------------------------
def _read_rows(data: bytes | str) -> tuple[list[tuple[int, Judged]], list[str]]:
    """The good rows of a judged questions CSV as (line, record), and the notes on the bad ones — read as the
    command's readers read (the same decoding, delimiters, columns and row notes), with a judgement's checks."""
    text, problems = decode(data) if isinstance(data, bytes) else (data.lstrip("\ufeff"), [])
    free = is_free_form(text)
    required, gold = (FREE_REQUIRED, FREE_GOLD) if free else (REQUIRED, GOLD)
    reader = csv.reader(io.StringIO(text), delimiter=_delimiter(text.split("\n", 1)[0], required + gold + EXTRA))
    got: list[tuple[int, Judged]] = []
    try:
        header = [h.strip() for h in next(reader, [])]
        col = _columns(header, required + gold, EXTRA, ", ".join(required + gold) + " (a judged question's right "
                       "answer, document and page)" + ("; an empty Answer: not in these documents" if free else ""))
        used = [(c, i) for c, i in col.items() if c in required + gold + EXTRA]

        def check(get: dict) -> str | None:
            try:
                got.append((reader.line_num, _row(get, free)))
            except JudgedError as e:
                return str(e)
            return None

        for _ in question_rows(reader, used, problems, check=check):
            pass
    except csv.Error as e:
        raise QuestionsError(f"the file is not valid CSV at line {reader.line_num}: {e}") from None
    _, problems = finish([r.question_for_run() for _, r in got], problems, None)  # none usable: QuestionsError
    return got, problems


def _row(get: dict, free: bool) -> Judged:
    verdict = get.get("Judgement", "").strip().lower()
    kind = get.get("Error_Kind", "").strip()
    page = _page(get.get("Page_Num", "")) if get.get("Page_Num") else None
    if get.get("Page_Num") and page is None:
        raise JudgedError(f"the page {_short(get['Page_Num'], 20)!r} is not a number")
    if free:
        opts, answer = (), get["Answer"]
    else:
        opts, answer = tuple(get[L] for L in LETTERS), get["Correct_Answer"]
        if not answer:
            raise JudgedError(f"no Correct_Answer (a letter, or “{NONE}”: {NOT_IN_DOCUMENTS})")
        answer = "" if gold_answer(answer) == NONE else answer  # "none": not in these documents, options kept
        if answer and not get["Doc_ID"]:
            raise JudgedError("no Doc_ID: a judged question names the document of its right answer")
    r = _checked(get["Question"], opts, WRONG, None, answer if answer else None, not answer, get["Doc_ID"], page,
                 kind if kind in ERROR_KINDS else "", get.get("Note", ""))
    at = get.get("Judged_At", "")
    return replace(r, qid=get["Question_ID"], verdict=verdict if verdict in VERDICTS else "",
                   judged_at=at if _ISO.fullmatch(at) else "")
