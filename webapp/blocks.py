"""Parsing a pasted question block into a question and six options.

Accepted::

    Яка столиця України?
    A) Київ
    B. Львів
    ...

Option markers are a letter followed by ``)``, ``.`` or ``:`` (optionally in
brackets: ``(A)``), Latin ``A``–``F`` or Cyrillic: either the Ukrainian order
``А Б В Г Д Е`` (when any of ``Б Г Д`` appears) or the Latin look-alikes
``А В С Е`` standing for A B C E. Lines after an option continue it; lines
before the first option are the question. A one-line block ``Q? A) x B) y``
is split too.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.types import LETTERS

# Cyrillic letters that look like Latin option letters (upper and lower case)
LOOKALIKE = {"А": "A", "В": "B", "С": "C", "Е": "E", "а": "A", "в": "B", "с": "C", "е": "E"}
# Ukrainian test order: А Б В Г Д Е = A B C D E F
UKRAINIAN = {c: LETTERS[i] for i, c in enumerate("АБВГДЕ")} | {c: LETTERS[i] for i, c in enumerate("абвгде")}
UKRAINIAN_ONLY = set("БГДбгд")

_MARKER = re.compile(r"^\s*[\(\[]?\s*([A-Fa-fАБВГДЕСабвгдес])\s*[\)\]\.:]\s*(.*)$")
_INLINE = re.compile(r"(?:^|(?<=\s))[\(\[]?([A-FАБВГДЕС])[\)\]]\s+")
_ANSWER_LINE = re.compile(r"^\s*(відповідь|answer|правильна відповідь)\s*[:\-]", re.IGNORECASE)


class BlockError(ValueError):
    """A block that cannot be read as a question with options; the message is for the user."""


@dataclass
class ParsedBlock:
    question: str
    options: list[str]  # six, "" where missing
    notes: list[str] = field(default_factory=list)


def _scheme(markers: list[str]) -> dict[str, str]:
    """The letter mapping for the markers found: Ukrainian order if any Б/Г/Д is used."""
    if any(m in UKRAINIAN_ONLY for m in markers):
        return {**{c: c.upper() for c in "ABCDEFabcdef"}, **UKRAINIAN}
    return {**{c: c.upper() for c in "ABCDEFabcdef"}, **LOOKALIKE}


def _from_lines(lines: list[str]) -> tuple[list[str], dict[str, list[str]]] | None:
    found = [(i, m.group(1), m.group(2)) for i, line in enumerate(lines) if (m := _MARKER.match(line))]
    if not found:
        return None
    scheme = _scheme([f[1] for f in found])
    by_line = {i: (scheme.get(mk), rest) for i, mk, rest in found}
    question: list[str] = []
    options: dict[str, list[str]] = {}
    current: str | None = None
    has_a = any(letter == "A" for letter, _ in by_line.values())
    for i, line in enumerate(lines):
        letter, rest = by_line.get(i, (None, None))
        # markers open options in order; the first must be A when the block has an A
        opens = letter is not None and (
            (current is None and (letter == "A" or not has_a))
            or (current is not None and LETTERS.index(letter) > LETTERS.index(current)))
        if opens:
            current = letter
            options[letter] = [rest] if rest else []
        elif current is None:
            question.append(line)
        elif not _ANSWER_LINE.match(line):
            options[current].append(line)
    return question, options


def _from_inline(text: str) -> tuple[list[str], dict[str, list[str]]] | None:
    marks = list(_INLINE.finditer(text))
    if len(marks) < 2:
        return None
    scheme = _scheme([m.group(1) for m in marks])
    question = text[: marks[0].start()]
    options: dict[str, list[str]] = {}
    last = -1
    for k, m in enumerate(marks):
        letter = scheme.get(m.group(1))
        end = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        if letter is None or LETTERS.index(letter) <= last:
            continue
        last = LETTERS.index(letter)
        options[letter] = [text[m.end(): end]]
    return [question], options


def parse_block(text: str) -> ParsedBlock:
    """The question and six options of a pasted block (raises :class:`BlockError`)."""
    text = (text or "").replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        raise BlockError("the block is empty: paste a question line and lines starting A) … F)")
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    got = _from_lines(lines)
    if got is None or len(got[1]) < 2:
        got = _from_inline(" ".join(lines)) or got
    if got is None:
        raise BlockError("no options found: put each option on its own line starting with A), B), … F) "
                         "(or A. / А) / Б) …)")
    question_lines, options = got
    question = " ".join(" ".join(question_lines).split())
    question = re.sub(r"^(питання|запитання|question)\s*(№?\s*\d+)?\s*[:.)]\s*", "", question, flags=re.IGNORECASE)
    opts = [" ".join(" ".join(options.get(L, [])).split()) for L in LETTERS]
    if not question:
        raise BlockError("no question text found before the options")
    if sum(1 for o in opts if o) < 2:
        raise BlockError("fewer than two options found: each option needs its own line starting with A), B), …")
    notes = [f"option {L} is missing" for L, o in zip(LETTERS, opts) if not o]
    return ParsedBlock(question, opts, notes)
