"""What the three tabs share: the app's context, data frames, and turning failures into messages.

A :class:`~pipeline.errors.PdfQaError` is the user's to fix (or a model server's
failure): one log line, and its message shown. Anything else is a bug: its
traceback is logged and the user told only that something went wrong.
"""
from __future__ import annotations

import functools
import html
import inspect
import logging
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr
import pandas as pd

from pipeline.errors import PdfQaError
from pipeline.settings import Settings
from pipeline.types import Question

from .files import Files
from .line import Line
from .sessions import SessionStore, valid_session_id

log = logging.getLogger("webapp")

SOMETHING_WRONG = "Something went wrong on our side; it is logged. Try again, or reload the page."

# The options of an event that runs outside the queue (at once, even while the queue is busy). Such an event must
# never raise an error meant for the person: Gradio answers it with an HTTP 500 whose message the page drops (the
# page's client passes on the message but not "visible", and without it no toast is shown; tests/test_app.py checks
# that every event whose handler is :func:`handled` is queued). A handler outside the queue that may refuse returns
# the reason where the person looks instead (Evaluate's Run: beside the button), and only then may a gate with
# nothing to say raise to stop what is chained to it (evaluate_tab.on_go).
QUIET = dict(queue=False, show_progress="hidden")


@dataclass
class Context:
    """What every tab's handlers need: the settings, the visitors' libraries, the sample corpus."""

    settings: Settings
    store: SessionStore
    sample_dir: Path
    examples: list[Question] = field(default_factory=list)
    model_work: dict = field(default_factory=dict)  # event options that put model work in the one queue
    line: Line = field(default_factory=Line)  # the questions waiting for the model (place and wait, webapp/line.py)
    files: Files | None = None  # the visitors' page images and downloads (webapp/files.py)

    def __post_init__(self):
        self.line.slots = max(1, self.settings.web.model_concurrency)
        self.files = self.files or Files(self.store)


def df(rows: list[list], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns)


def user_error(message: str, toast: bool = True) -> gr.Error:
    """A user-facing error; Gradio shows its message as HTML, so it is escaped. Gradio prints no traceback
    for it (the handler logs one line; a bug's traceback is logged by :func:`message`). ``toast=False``: no
    toast (Gradio titles every one "Error"), for a refusal that the page says where the answer goes."""
    return gr.Error(html.escape(message), visible=toast, print_exception=False)


def message(e: BaseException, doing: str) -> str:
    """What to tell the user about ``e``: its own message when expected, else that it is logged."""
    if isinstance(e, PdfQaError):
        log.info("%s: %s: %s", doing, type(e).__name__, e)
        return str(e)
    log.error("%s failed", doing, exc_info=e)
    return SOMETHING_WRONG


def bind(fn, *bound):
    """``fn`` with its first arguments given (a tab's context and components), as a plain function Gradio can
    read: it keeps ``fn``'s name (the API endpoint's), whether it is a generator (streamed), and the signature and
    type hints of the arguments left (``gr.SelectData`` is passed by its annotation). ``functools.partial``
    loses the last two."""
    if inspect.isgeneratorfunction(fn):
        def call(*args, **kwargs):
            yield from fn(*bound, *args, **kwargs)
    else:
        def call(*args, **kwargs):
            return fn(*bound, *args, **kwargs)
    sig = inspect.signature(fn)
    left = list(sig.parameters.values())[len(bound):]
    call.__name__ = call.__qualname__ = fn.__name__
    call.__doc__, call.__module__ = fn.__doc__, fn.__module__
    call.__wrapped__ = fn  # where typing finds the module its string annotations are read in
    call.__signature__ = sig.replace(parameters=left)  # what inspect.signature gives, before __wrapped__
    call.__annotations__ = {k: v for k, v in getattr(fn, "__annotations__", {}).items()
                            if k in {p.name for p in left}}
    return call


def handled(doing: str):
    """Decorate a handler: a ``gr.Error`` passes; any other exception becomes one (see :func:`message`). The
    handler is marked as one that raises (``raises_to_page``): its event must be queued (see :data:`QUIET`)."""
    def wrap(fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen(*args, **kwargs):
                try:
                    yield from fn(*args, **kwargs)
                except gr.Error:
                    raise
                except Exception as e:
                    raise user_error(message(e, doing)) from None
            gen.raises_to_page = True
            return gen

        @functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except gr.Error:
                raise
            except Exception as e:
                raise user_error(message(e, doing)) from None
        call.raises_to_page = True
        return call
    return wrap


def raises_to_page(fn) -> bool:
    """Whether ``fn`` (or what it wraps: :func:`bind`, :func:`handled`) may raise an error meant for the page."""
    while fn is not None:
        if getattr(fn, "raises_to_page", False):
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


NO_SESSION = ("This page has no session yet (still loading) or no longer (open a long time while many others "
              "came): wait a moment, or reload the page — your library is kept.")


def need_sid(sid: str) -> str:
    if not valid_session_id(sid):
        raise user_error(NO_SESSION)
    return sid
