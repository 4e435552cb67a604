"""One error hierarchy: every failure the program expects is a :class:`PdfQaError`.

* :class:`UserError` — the user can fix it (a bad file, a bad questions CSV, an
  empty library, a library built with other settings); its message is meant for
  them and is shown as is.
* :class:`BackendError` — a model or vector server, or a model's files, failed;
  the message names which one and how.

Anything else is a bug: the web app logs its traceback and tells the user only
that something went wrong. Each class keeps the built-in base it had before
(``ValueError``, ``RuntimeError``, ``ImportError``) so older callers still work.
"""
from __future__ import annotations


class PdfQaError(Exception):
    """Base of every expected failure; ``str(e)`` is a message for the user."""


# ---- user errors ---------------------------------------------------------------
class UserError(PdfQaError, ValueError):
    """A user's mistake or a limit reached: the message says what and how to fix it."""


class IngestError(UserError):
    """A PDF that cannot be indexed (or a limit reached); the message starts with its name."""


class QuestionsError(UserError):
    """A questions file that cannot be used."""


class QuestionError(UserError):
    """A question that cannot be asked as it is (empty, too few options, over a length limit)."""


class EmptyLibrary(UserError):
    """Nothing to answer from: the library has no documents."""


class LibraryMismatch(UserError):
    """The library on disk does not go with these settings (chunking, embedder, vector store)."""


# ---- backend errors --------------------------------------------------------------
class BackendError(PdfQaError, RuntimeError):
    """A model server failed; the message says which one and how."""


class BackendTimeout(BackendError):
    """A model server did not answer within ``remote_timeout`` (each one costs that long)."""


class BackendUnavailable(BackendError, ImportError):
    """A backend that cannot run here: its module does not import, or its server cannot be reached."""


class BackendUnsupported(BackendError):
    """A backend asked for something it cannot do (e.g. free text from an answerer that only scores letters,
    or continuation scoring on a server whose echoed log-probabilities are wrong)."""


class ModelMissing(BackendError):
    """A model's files are not installed (or do not match their checksum)."""
