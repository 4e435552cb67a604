"""Per-visitor libraries: one data directory per browser session, opened lazily, expired when left.

Layout under ``data_dir``::

    sessions/<32 hex>/library/   one visitor's library (pipeline.index.Library)
    sessions/<32 hex>/runs/<name>/   that visitor's saved evaluation runs
    sessions/<32 hex>/.last_used     touched on every use (its mtime is the age)
    library/, runs/                  the shared library (``shared=True``), as ``python -m pipeline.evaluate`` uses

A session id is a random 128-bit token kept in the browser (localStorage), so a
visitor finds their library again after a reload or an app restart. An id
that is not 32 lowercase hex digits is never turned into a path.
"""
from __future__ import annotations

import logging
import re
import secrets
import shutil
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

log = logging.getLogger(__name__)

_ID = re.compile(r"[0-9a-f]{32}")
SHARED = "shared"


def new_session_id() -> str:
    return secrets.token_hex(16)


def valid_session_id(sid: object) -> bool:
    return isinstance(sid, str) and _ID.fullmatch(sid) is not None


class SessionStore:
    """Maps session ids to data directories and open pipelines (a bounded LRU cache).

    ``opener(root: Path)`` builds a pipeline for a library directory (it is
    called lazily, on first use that needs one). With ``shared=True`` every
    session id maps to the one shared library.
    """

    def __init__(self, data_dir: Path | str, opener: Callable[[Path], object], *, shared: bool = False,
                 max_sessions: int = 200, max_age_s: float = 7 * 86400, max_open: int = 8,
                 closer: Callable[[object], None] | None = None):
        self.data_dir = Path(data_dir)
        self.sessions_dir = self.data_dir / "sessions"
        self.opener = opener
        self.closer = closer or (lambda pipe: getattr(pipe, "library", pipe).close())  # Library.close
        self.shared = shared
        self.max_sessions, self.max_age_s, self.max_open = max_sessions, max_age_s, max_open
        self._open: OrderedDict[str, object] = OrderedDict()
        self._busy: dict[str, int] = {}
        self._lock = threading.RLock()
        self._key_locks: dict[str, threading.Lock] = {}

    # ---- paths ---------------------------------------------------------
    def key(self, sid: str) -> str:
        if self.shared:
            return SHARED
        if not valid_session_id(sid):
            raise ValueError("no valid session: reload the page")
        return sid

    def session_dir(self, sid: str) -> Path:
        k = self.key(sid)
        return self.data_dir if k == SHARED else self.sessions_dir / k

    def library_dir(self, sid: str) -> Path:
        return self.session_dir(sid) / "library"

    def runs_dir(self, sid: str) -> Path:
        return self.session_dir(sid) / "runs"

    def exists(self, sid: str) -> bool:
        """Whether the session has a library on disk (nothing is created)."""
        return (self.library_dir(sid) / "library.sqlite").exists()

    def touch(self, sid: str) -> None:
        d = self.session_dir(sid)
        if self.key(sid) == SHARED or not d.exists():
            return
        (d / ".last_used").touch()

    def last_used(self, d: Path) -> float:
        mark = d / ".last_used"
        try:
            return mark.stat().st_mtime if mark.exists() else d.stat().st_mtime
        except OSError:
            return 0.0

    # ---- pipelines -------------------------------------------------------
    @contextmanager
    def open(self, sid: str) -> Iterator[object]:
        """The session's pipeline (created on first use), held open while the block runs."""
        k = self.key(sid)
        with self._lock:
            self._busy[k] = self._busy.get(k, 0) + 1
            klock = self._key_locks.setdefault(k, threading.Lock())
        try:
            with klock:  # one opener per session at a time
                with self._lock:
                    pipe = self._open.get(k)
                    if pipe is not None:
                        self._open.move_to_end(k)
                if pipe is None:
                    created = not self.session_dir(sid).exists()
                    self.library_dir(sid).mkdir(parents=True, exist_ok=True)
                    pipe = self.opener(self.library_dir(sid))
                    with self._lock:
                        self._open[k] = pipe
                    if created:
                        self.cleanup()
            self.touch(sid)
            yield pipe
        finally:
            with self._lock:
                self._busy[k] -= 1
                if not self._busy[k]:
                    del self._busy[k]
                self._evict()

    def _evict(self) -> None:
        """Close the least recently used pipelines over ``max_open`` that nobody is using."""
        with self._lock:
            for k in list(self._open):
                if len(self._open) <= self.max_open:
                    break
                if k in self._busy:
                    continue
                self.closer(self._open.pop(k))

    def forget(self, key: str) -> None:
        with self._lock:
            pipe = self._open.pop(key, None)
        if pipe is not None:
            self.closer(pipe)

    # ---- expiry ----------------------------------------------------------
    def cleanup(self, now: float | None = None) -> list[str]:
        """Delete session dirs unused for ``max_age_s``, then the oldest beyond ``max_sessions``.

        Sessions in use right now are never deleted. Returns the ids removed.
        """
        if not self.sessions_dir.exists():
            return []
        now = time.time() if now is None else now
        with self._lock:
            busy = set(self._busy)
        dirs = [d for d in self.sessions_dir.iterdir() if d.is_dir() and valid_session_id(d.name)]
        dirs.sort(key=self.last_used, reverse=True)  # newest first
        removed = []
        for i, d in enumerate(dirs):
            too_old = now - self.last_used(d) > self.max_age_s
            too_many = i >= self.max_sessions
            if (too_old or too_many) and d.name not in busy:
                self.forget(d.name)
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d.name)
        if removed:
            log.info("expired %d session(s)", len(removed))
        return removed
