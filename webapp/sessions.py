"""Per-visitor libraries: one data directory per browser session, opened lazily, expired when left.

Layout under ``data_dir``::

    sessions/<32 hex>/library/   one visitor's library (pipeline.index.Library)
    sessions/<32 hex>/runs/<name>/   that visitor's saved evaluation runs
    sessions/<32 hex>/.last_used     touched on every use (its mtime is the age)
    files/<32 hex>/                  the files shown to or downloaded by that visitor (page images, a run's
                                     downloads), named by the library's files key (:meth:`SessionStore.files_key`,
                                     never the id itself: a file's URL carries it), deleted with the library
    library/, runs/                  the shared library (``shared=True``), as ``python -m pipeline.evaluate`` uses

A session id is a token the server issues (:meth:`SessionStore.new_id`: 64 random bits and 64 bits of an HMAC
under the server's signing key, 32 hex digits) kept in the browser (localStorage), so a visitor finds their library
again after a reload or an app restart. An id the server did not issue (its HMAC wrong) is never made a library
(:meth:`SessionStore.issued`), and one that is not 32 lowercase hex digits is never turned into a path.

The signing key (:func:`server_key`, ``<data_dir>/.server-key``) signs ids, files keys and reader tokens and never
leaves the server: it is not the key Gradio's ``BrowserState`` encrypts localStorage with, which Gradio sends to
every page (``webapp.ui.browser_state_key``).

A batch of uploads being indexed is recorded in ``<session dir>/indexing/<process>-<n>.json`` until it ends; one
left by an earlier process (the server was killed or restarted while reading it) names the documents that were
not stored (:meth:`SessionStore.interrupted`), told to their visitor on the next visit.
"""
from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import logging
import os
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
KEY_FILE = ".server-key"
PROCESS = secrets.token_hex(8)  # this process's name on its indexing records (another name: an earlier process)
_batches = itertools.count()


def server_key(data_dir: Path | str) -> str:
    """The key that signs library ids, files keys and reader tokens (``<data_dir>/.server-key``, mode 600, made
    once and kept so ids survive restarts). Only the server reads it: nothing a page receives is, or is derived
    from it, but the tokens it signs for that page's own library."""
    f = Path(data_dir) / KEY_FILE
    try:
        key = f.read_text().strip()
    except FileNotFoundError:
        key = ""
    if key:
        return key
    f.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # never readable by others, not even briefly
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))
    return f.read_text().strip()


def new_session_id(secret: str = "") -> str:
    """A random id sealed with ``secret``: 16 random hex digits and the first 16 of their HMAC."""
    rand = secrets.token_hex(8)
    return rand + _mac(secret, "id", rand)[:16]


def _mac(secret: str, purpose: str, value: str) -> str:
    return hmac.new(secret.encode(), f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


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
                 closer: Callable[[object], None] | None = None, secret: str = ""):
        self.data_dir = Path(data_dir)
        self.sessions_dir = self.data_dir / "sessions"
        self.files_root = self.data_dir / "files"
        self.secret = secret
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

    def new_id(self) -> str:
        """A fresh session id, issued by this server (sealed with its secret)."""
        return new_session_id(self.secret)

    def issued(self, sid: object) -> bool:
        """Whether ``sid`` is an id this server issued: its HMAC holds, or it names a library already on disk
        (made before ids were sealed). Any other 32-hex value a client picks never becomes a library."""
        if not valid_session_id(sid):
            return False
        good = hmac.compare_digest(sid[16:], _mac(self.secret, "id", sid[:16])[:16])
        return good or (self.sessions_dir / sid).is_dir()

    def files_key(self, sid: str) -> str:
        """The name of the library's files folder (in its files' URLs): derived from the id, which it does not
        reveal."""
        return _mac(self.secret, "files", self.key(sid))[:32]  # the shared library's: of SHARED

    def reader_token(self, files_key: str) -> str:
        """What the browser of the library with ``files_key`` holds (a cookie) to be served its files."""
        return _mac(self.secret, "reader", files_key)[:32]

    def files_dir(self, sid: str) -> Path:
        return self.files_root / self.files_key(sid)

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
                shutil.rmtree(self.files_root / _mac(self.secret, "files", d.name)[:32], ignore_errors=True)
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d.name)
        if removed:
            log.info("expired %d session(s)", len(removed))
        return removed

    def sweep_files(self) -> int:
        """At start: delete the files folders of no library (a library expired or removed by hand, or files keys
        made with an earlier signing key). What they held are copies made for showing (page images, a run's
        downloads), made again when next shown. Returns how many were deleted."""
        if not self.files_root.is_dir():
            return 0
        keys = {_mac(self.secret, "files", SHARED)[:32]} if self.shared else set()
        if self.sessions_dir.is_dir():
            keys |= {_mac(self.secret, "files", d.name)[:32] for d in self.sessions_dir.iterdir()
                     if d.is_dir() and valid_session_id(d.name)}
        gone = 0
        for d in self.files_root.iterdir():
            if d.name not in keys:
                shutil.rmtree(d, ignore_errors=True) if d.is_dir() else d.unlink(missing_ok=True)
                gone += 1
        if gone:
            log.info("deleted %d files folder(s) of no library", gone)
        return gone

    # ---- uploads being indexed -------------------------------------------------
    def begin_indexing(self, sid: str, names: list[str]) -> Path:
        """Record that ``names`` are being indexed into the session's library (until :meth:`end_indexing`)."""
        d = self.session_dir(sid) / "indexing"
        d.mkdir(parents=True, exist_ok=True)
        rec = d / f"{PROCESS}-{next(_batches)}.json"
        self.indexing_left(rec, names)
        return rec

    @staticmethod
    def indexing_left(rec: Path, names: list[str]) -> None:
        """What of the batch is not stored yet (a document is taken off once stored or refused)."""
        tmp = rec.with_suffix(".tmp")
        tmp.write_text(json.dumps(names, ensure_ascii=False))
        tmp.replace(rec)

    @staticmethod
    def end_indexing(rec: Path) -> None:
        rec.unlink(missing_ok=True)

    def interrupted(self, sid: str) -> list[str]:
        """The documents an earlier process was indexing into this library when it stopped (never stored): their
        records are deleted once read, so they are said once."""
        if not (self.shared or valid_session_id(sid)):
            return []
        d = self.session_dir(sid) / "indexing"
        if not d.is_dir():
            return []
        names: list[str] = []
        for rec in sorted(d.glob("*.json")):
            if rec.name.startswith(f"{PROCESS}-"):
                continue  # this process's: still being indexed
            try:
                names += [n for n in json.loads(rec.read_text()) if isinstance(n, str) and n not in names]
            except (OSError, ValueError):
                pass
            rec.unlink(missing_ok=True)
        for tmp in d.glob("*.tmp"):
            if not tmp.name.startswith(f"{PROCESS}-"):
                tmp.unlink(missing_ok=True)
        return names
