"""The questions waiting for the model, as a visitor sees them: their place in line and a wait estimated from
the answers this app has measured (the median of the last few). Each question is a ticket (the time its
button was clicked): it joins when the click is taken, is served when its handler starts, and leaves when
that ends; a ticket never served (the visitor left while it waited) is dropped after ``stale_s``. Other model
work (indexing, evaluation runs) shares the queue but is not counted here, so the message says "questions".
"""
from __future__ import annotations

import functools
import inspect
import statistics
import threading
import time
from collections import deque


class Line:
    def __init__(self, slots: int = 1, keep: int = 9, stale_s: float = 1800.0):
        self.slots, self.stale_s = max(1, slots), stale_s
        self._lock = threading.Lock()
        self._waiting: dict[float, float] = {}  # ticket -> when it joined (monotonic)
        self._serving: set[float] = set()
        self._seconds: deque[float] = deque(maxlen=keep)  # the last answers' seconds (served, not waited)

    def join(self, ticket: float) -> None:
        with self._lock:
            now = time.monotonic()
            self._waiting = {t: at for t, at in self._waiting.items() if now - at < self.stale_s}
            self._waiting[ticket] = now

    def serve(self, ticket: float) -> None:
        with self._lock:
            self._waiting.pop(ticket, None)
            self._serving.add(ticket)

    def leave(self, ticket: float, seconds: float | None = None) -> None:
        with self._lock:
            self._waiting.pop(ticket, None)
            self._serving.discard(ticket)
            if seconds is not None:
                self._seconds.append(seconds)

    def ahead(self, ticket: float) -> int:
        """Questions before this one: those being answered and those that joined earlier."""
        with self._lock:
            return len(self._serving) + sum(1 for t in self._waiting if t < ticket)

    def per_answer(self) -> float | None:
        with self._lock:
            return statistics.median(self._seconds) if self._seconds else None

    def message(self, ticket: float) -> str:
        """Where this question stands, and (once answers were measured) about how long until its answer."""
        n, per = self.ahead(ticket), self.per_answer()
        place = (f"{n} question{'s' if n != 1 else ''} ahead of yours" if n else "no question ahead of yours")
        if per is None:
            return f"Waiting for the model… ({place})"
        rounds = n // self.slots + 1  # the answers before it, `slots` at a time, then its own
        return (f"Waiting for the model: {place}; your answer in about {rounds * per:.0f} s "
                f"(an answer takes {per:.0f} s here, the median of the last {len(self._seconds)})")


def served(fn):
    """Decorate a streaming handler whose arguments include ``ctx`` (with a ``line``) and ``t_click`` (its
    ticket): the ticket is served while it runs and leaves when it ends, its seconds measured."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        got = sig.bind_partial(*args, **kwargs).arguments
        line, ticket = got["ctx"].line, float(got.get("t_click") or 0.0)
        line.serve(ticket)
        t0, finished = time.monotonic(), False
        try:
            yield from fn(*args, **kwargs)
            finished = True
        finally:
            line.leave(ticket, time.monotonic() - t0 if finished else None)
    return run
