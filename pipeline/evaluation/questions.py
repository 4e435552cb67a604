"""Reading a questions file in the competition's format (``Question_ID, Question, A–F``; gold columns optional).

Tolerant of what spreadsheets write: UTF-8 (with or without BOM), UTF-16 or
Windows-1251; comma, semicolon or tab; columns in any order and case. A file
that cannot be used raises :class:`~pipeline.errors.QuestionsError`; a bad row
is skipped with a note. Never reads ``Domain`` or ``N_Pages``.

``Correct_Answer`` is a letter, or :data:`NONE` ("none"): the answer is in none of the documents (a question
judged "not in these documents" in the app keeps its options; no ``Doc_ID`` or ``Page_Num``). A run scores such
a question right when it says "not found" (its not-in-documents flag), and then its document and page right too:
naming none was right (``metric.metrics``).
"""
from __future__ import annotations

import csv
import io

from ..errors import QuestionsError
from ..types import LETTERS, Question

REQUIRED = ["Question_ID", "Question", *LETTERS]
GOLD = ["Correct_Answer", "Doc_ID", "Page_Num"]
NONE = "none"  # Correct_Answer: the answer is in none of the documents ("not in these documents")
MAX_CELL = 5000  # characters; a longer cell is cut (with a note)
MAX_PROBLEMS = 50  # notes returned; the rest are counted
_NOT_TEXT = {b"PK\x03\x04": "a ZIP archive or an Excel .xlsx workbook", b"\xd0\xcf\x11\xe0": "an Excel .xls workbook",
             b"%PDF": "a PDF", b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image"}


def decode(data: bytes) -> tuple[str, list[str]]:
    """The text of a questions file: UTF-8 (BOM or not), UTF-16 (BOM, or plainly so), else Windows-1251."""
    if not data.strip():
        raise QuestionsError("the questions file is empty")
    for magic, what in _NOT_TEXT.items():
        if data.startswith(magic):
            raise QuestionsError(f"the questions file is not CSV text but {what}: save it as CSV (UTF-8) first")
    notes: list[str] = []
    half = len(data) // 2
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        text = data.decode("utf-16", errors="replace")
    elif half and data[1::2].count(0) > half // 2:  # ASCII-heavy UTF-16 without a BOM
        text = data.decode("utf-16-le", errors="replace")
    elif half and data[0::2].count(0) > half // 2:
        text = data.decode("utf-16-be", errors="replace")
    else:
        text = data.decode("utf-8", errors="replace")
        bad = text.count("\ufffd")
        high = len(data) - len(data.translate(None, bytes(range(128))))  # bytes >= 0x80
        if bad and bad * 20 > high:  # mostly not UTF-8: Windows-1251
            text = data.decode("cp1251", errors="replace")
        elif bad:
            notes.append(f"{bad} byte(s) that are not UTF-8 were replaced by \ufffd")
    text = text.lstrip("\ufeff")
    if not text.strip():
        raise QuestionsError("the questions file is empty")
    controls = sum(1 for ch in text[:100_000] if ch < " " and ch not in "\t\r\n")
    if controls > len(text[:100_000]) // 100:
        raise QuestionsError("the questions file is not text (it looks binary): expected a CSV file")
    return text, notes


def _delimiter(first_line: str, columns: list[str] | None = None) -> str:
    """Comma, semicolon or tab: whichever splits the header into the most known column names."""
    known = {c.casefold() for c in (columns or REQUIRED + GOLD)}
    return max((",", ";", "\t"),
               key=lambda d: sum(f.strip().casefold() in known for f in next(csv.reader([first_line], delimiter=d))))


def _columns(header: list[str], required: list[str], optional: list[str], expected: str) -> dict[str, int]:
    """Each column name (known ones in their canonical case) → its index; raises :class:`QuestionsError`
    naming what is missing and ``expected``."""
    canon = {c.casefold(): c for c in required + optional}
    col: dict[str, int] = {}
    for i, h in enumerate(header):
        col.setdefault(canon.get(h.casefold(), h), i)
    missing = [c for c in required if c not in col]
    if missing:
        found = ", ".join(_short(h, 30) for h in header[:20] if h) or "nothing"
        raise QuestionsError(f"the questions file lacks the column(s) {', '.join(missing)} (found: {found}); "
                             f"expected {expected}")
    return col


def _short(s: str, n: int = 40) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _page(s: str) -> int | None:
    try:
        return int(float(s))  # "4" or Excel's "4.0"
    except (ValueError, OverflowError):
        return None


def question_rows(reader, used: list[tuple[str, int]], problems: list[str], check=None):
    """The usable rows of a questions CSV (after its header) as {column: stripped cell}, cells over
    ``MAX_CELL`` cut with a note. A blank row is passed over; a row without Question_ID or question, with
    an ID already used by an earlier usable row, or for which ``check(cells)`` gives a reason, is skipped
    with a note in ``problems``."""
    seen: dict[str, int] = {}
    line = reader.line_num + 1
    for row in reader:
        n, line = line, reader.line_num + 1  # a quoted cell may span lines
        if not any(c.strip() for c in row):
            continue
        get = {c: (row[i].strip() if i < len(row) else "") for c, i in used}
        qid = get["Question_ID"]
        where = f"line {n} (Question_ID {_short(qid)})" if qid else f"line {n}"
        long = [c for c, v in get.items() if len(v) > MAX_CELL]
        if long:
            problems.append(f"{where}: {', '.join(long)} cut to {MAX_CELL} characters")
            get.update({c: get[c][:MAX_CELL] for c in long})
        why = ("no Question_ID" if not qid else "the question is empty" if not get["Question"]
               else f"this Question_ID is already used on line {seen[qid]}" if qid in seen
               else check(get) if check else None)
        if why:
            problems.append(f"{where}: {why} — skipped")
            continue
        seen[qid] = n
        yield get


def _six_options(get: dict[str, str]) -> str | None:
    return "fewer than two non-empty options" if sum(1 for L in LETTERS if get[L]) < 2 else None


def read_questions(data: bytes | str, max_questions: int | None = None) -> tuple[list[Question], list[str]]:
    """Questions from a competition-format CSV, and notes on what was skipped or changed.

    Columns ``Question_ID, Question, A–F`` are required (any order, any case; others are ignored;
    ``Correct_Answer, Doc_ID, Page_Num`` are read as gold); comma, semicolon or tab separated.
    A file that cannot be used at all — or holds more than ``max_questions`` questions
    (``settings.limits.max_questions``) — raises :class:`QuestionsError`; bad rows are skipped with a note.
    """
    text, problems = decode(data) if isinstance(data, bytes) else (data.lstrip("\ufeff"), [])
    reader = csv.reader(io.StringIO(text), delimiter=_delimiter(text.split("\n", 1)[0]))
    try:
        header = [h.strip() for h in next(reader, [])]
        col = _columns(header, REQUIRED, GOLD, "Question_ID, Question, A, B, C, D, E, F, and for scoring "
                                               "Correct_Answer, Doc_ID, Page_Num")
        extra = [h for h in header if len(h) == 1 and h.upper() > "F" and h.isalpha()]
        if extra:
            problems.append(f"column(s) {', '.join(extra)} ignored: a question has six options, A–F")
        used = [(c, i) for c, i in col.items() if c in REQUIRED + GOLD]
        questions: list[Question] = []
        for get in question_rows(reader, used, problems, check=_six_options):
            gold = gold_answer(get.get("Correct_Answer", ""))
            none = gold == NONE  # no document, no page: the answer is in none of them
            questions.append(Question(get["Question_ID"], get["Question"], [get[L] for L in LETTERS], gold,
                                      None if none else get.get("Doc_ID") or None,
                                      None if none else _page(get.get("Page_Num", ""))))
    except csv.Error as e:
        raise QuestionsError(f"the questions file is not valid CSV at line {reader.line_num}: {e}") from None
    return finish(questions, problems, max_questions)


def gold_answer(cell: str) -> str | None:
    """A Correct_Answer cell read: its letter, :data:`NONE` for "none" (any case), else None (no gold answer)."""
    cell = (cell or "").strip()
    if cell.casefold() == NONE:
        return NONE
    return cell.upper() if len(cell) == 1 and cell.upper() in LETTERS else None


def has_gold(q: Question) -> bool:
    """Whether a question can be scored: it names its gold document, or its answer is in none (:data:`NONE`)."""
    return bool(q.gold_doc) or q.gold_answer == NONE


def finish(questions: list[Question], problems: list[str], max_questions: int | None) -> tuple[list[Question], list[str]]:
    """The end checks every questions reader shares: at least one usable question, at most ``max_questions``
    (raising :class:`QuestionsError`), and at most ``MAX_PROBLEMS`` row notes (the rest counted)."""
    if not questions:
        raise QuestionsError("the questions file has no usable question: " + "; ".join(problems[:3])
                             if problems else "the questions file has a header but no questions")
    if max_questions is not None and len(questions) > max_questions:
        raise QuestionsError(f"the questions file has {len(questions):,} questions, more than the {max_questions:,} "
                             f"allowed in one run: split it, or raise the limit (PDFQA_MAX_QUESTIONS)")
    if len(problems) > MAX_PROBLEMS:
        problems = problems[:MAX_PROBLEMS] + [f"… and {len(problems) - MAX_PROBLEMS:,} more"]
    return questions, problems
