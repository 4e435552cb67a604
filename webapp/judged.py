"""A visitor's judged questions (``pipeline.evaluation.judged``) kept with their library.

The file is ``<session dir>/judged.json``, beside the visitor's ``library/`` and ``runs/`` (the shared library's
beside its own): isolated as the library is (the session id is checked and turned into a path by
:class:`~webapp.sessions.SessionStore` only), and deleted with it when the session expires.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from pipeline.evaluation.judged import FILE, JudgedQuestions
from pipeline.types import Question

from .files import Files
from .sessions import SessionStore

DOWNLOADS = "judged-questions"  # the downloads' folder name among the visitor's files (as a run's name)


def judged(store: SessionStore, sid: str) -> JudgedQuestions:
    """The judged questions of the visitor ``sid`` (raises ``ValueError`` for an id that is not one)."""
    return JudgedQuestions(store.session_dir(sid) / FILE)


def library_documents(store: SessionStore, sid: str) -> list[str]:
    """The file names (Doc_IDs) of the documents in the visitor's library (none when it has no library)."""
    if not store.exists(sid):
        return []
    with store.open(sid) as pipe:
        return [d.name for d in pipe.library.documents()]


def ready_set(store: SessionStore, sid: str, free: bool = False) -> tuple[list[Question], list[str], bool]:
    """The visitor's judged questions as Evaluate reads a CSV: (questions, notes, free) — the questions with
    options (those judged "not in these documents" too) or, ``free``, those without, and a note for each left out
    because its document is no longer in the library."""
    return (*judged(store, sid).as_questions(library_documents(store, sid), free), free)


def downloads(store: SessionStore, files: Files, sid: str) -> list[str]:
    """The judged questions as CSV files for download (served to this visitor only): the questions with options
    in the competition's format, the others in the free-form format; each only when it has a question."""
    with tempfile.TemporaryDirectory() as tmp:
        return [files.download(sid, DOWNLOADS, p) for p in judged(store, sid).export_files(Path(tmp))]
