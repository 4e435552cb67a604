"""Checks on what a user brings before the models run: a question within the length limits, and
which gold documents of a questions file the library lacks (those questions cannot be scored right)."""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

from .errors import QuestionError
from .documents.ingest import safe_name
from .types import LETTERS, Question


def check_question(question: str, options: Sequence[str], settings, free_ok: bool = False) -> None:
    """Raise :class:`QuestionError` for an empty question, fewer than two options (none at all is a
    free-form question when ``free_ok``), or text over the limits ``settings.limits.max_question_chars`` /
    ``settings.limits.max_option_chars`` (counted after stripping)."""
    text = (question or "").strip()
    if not text:
        raise QuestionError("the question is empty: write a question first")
    if len(text) > settings.limits.max_question_chars:
        raise QuestionError(f"the question is {len(text):,} characters, over the limit of "
                            f"{settings.limits.max_question_chars:,} (PDFQA_MAX_QUESTION_CHARS)")
    given = [(o or "").strip() for o in options]
    n = sum(1 for o in given if o)
    if n < 2 and not (free_ok and n == 0):
        raise QuestionError("give at least two options" + (" (or none, for a short answer from the documents)"
                                                           if free_ok else ""))
    for letter, option in zip(LETTERS, given):
        if len(option) > settings.limits.max_option_chars:
            raise QuestionError(f"option {letter} is {len(option):,} characters, over the limit of "
                                f"{settings.limits.max_option_chars:,} (PDFQA_MAX_OPTION_CHARS)")


def missing_gold_documents(questions: Iterable[Question], library_names: Iterable[str]) -> list[tuple[str, int]]:
    """Gold documents (``Doc_ID``) that are not in the library, each with how many questions cite it,
    most cited first. Names are compared as the library stores them (:func:`pipeline.documents.ingest.safe_name`)."""
    have = {safe_name(n) for n in library_names}
    cited = Counter(q.gold_doc for q in questions if q.gold_doc and safe_name(q.gold_doc) not in have)
    return sorted(cited.items(), key=lambda kv: (-kv[1], kv[0]))


def missing_gold_note(missing: list[tuple[str, int]], n_questions: int, show: int = 5) -> str:
    """One plain sentence for Evaluate about :func:`missing_gold_documents`; empty when none is missing."""
    if not missing:
        return ""
    affected = sum(n for _, n in missing)
    docs = ", ".join(f"{name} ({n})" for name, n in missing[:show])
    more = f" and {len(missing) - show} more" if len(missing) > show else ""
    s = "s are" if len(missing) > 1 else " is"
    return (f"{len(missing)} gold document{s} not in the library: {docs}{more}. "
            f"{affected} of {n_questions} questions cite them: their document and page cannot be right, "
            "and their answers were chosen without the right evidence.")
