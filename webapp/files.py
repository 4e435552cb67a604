"""A visitor's files on the web: kept under their library's files folder, served only to their browser.

What a page shows or offers to download (page images, a run's ``submission.csv`` and ``trace.jsonl``) is written
to ``<data_dir>/files/<files key>/`` (:meth:`SessionStore.files_dir`) and served by Gradio from there as a
static path (no copy in Gradio's cache). :class:`FileGuard` stands in front of Gradio's ``/gradio_api/file=``
route: a file under ``files/<key>/`` is served only to a request whose ``pdfqa-reader`` cookie is that key's
reader token (the page sets it once its session is loaded, :data:`SET_READER_JS`); nothing in Gradio's upload
cache is served at all (uploads are read by the server, never shown back), and every other path is left to
Gradio's own checks; what it serves from a files folder is marked ``Cache-Control: private, no-store`` (no shared
cache or disk cache keeps a private page). A file goes with what it belongs to: a document's page images with the
document, a run's downloads with the run, all of them with the library; uploads are deleted once read
(:func:`drop_upload`), and those an earlier process left (killed before it read them) at start
(:func:`use_upload_folder`).
"""
from __future__ import annotations

import hmac
import logging
import os
import re
import secrets
import shutil
import time
from http.cookies import SimpleCookie
from pathlib import Path

from .sessions import SessionStore

log = logging.getLogger(__name__)

COOKIE = "pdfqa-reader"
# run in the page after the session is loaded: the reader token (the hidden box's value) as a cookie for this site;
# over https also in a frame of another site (a Space shown on huggingface.co), partitioned by that site
SET_READER_JS = (f"(token) => {{ if (!token) return; const where = location.protocol === 'https:' ? "
                 "'; SameSite=None; Secure; Partitioned' : '; SameSite=Lax'; "
                 f"document.cookie = '{COOKIE}=' + token + '; path=/; max-age=31536000' + where; }}")
SHOWN_HOURS = 6  # a page image shown is kept this long (a new one is written for each answer), then deleted
UPLOAD_MINUTES = 30  # an upload not read by then (a CSV left unrun) is deleted by Gradio (delete_cache)
FILE_ROUTES = ("/gradio_api/file=", "/gradio_api/file/")  # Gradio's file route and its deprecated twin
NO_STORE = (b"cache-control", b"private, no-store")
_PART = re.compile(r"[\w.\-]+")
_USER_UPLOADS = os.environ.get("GRADIO_TEMP_DIR")  # as the environment set it, before use_upload_folder

def _part(name: str) -> str:
    """``name`` as one folder name (a document's hash, a run's name), or ValueError."""
    if not isinstance(name, str) or not _PART.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"not a folder name: {name!r}")
    return name


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def _forms(path) -> set[Path]:
    """A path as given (made absolute) and with its links resolved: a guard must hold for both."""
    return {Path(os.path.abspath(path)), Path(os.path.realpath(path))}


def upload_folder() -> Path:
    """Gradio's upload and cache folder (GRADIO_TEMP_DIR)."""
    from gradio.utils import get_upload_folder

    return Path(os.path.abspath(get_upload_folder()))


def use_upload_folder(data_dir: Path) -> Path:
    """Point Gradio's uploads at ``<data_dir>/uploads`` (unless GRADIO_TEMP_DIR names a folder) and delete what an
    earlier process left there: an upload it never read (killed mid-upload or mid-indexing) is otherwise kept for
    ever, as Gradio's own sweep (``delete_cache``) tracks only the files of the process that made them. In a folder
    GRADIO_TEMP_DIR names (maybe shared with other apps) only uploads older than UPLOAD_MINUTES go. Call before the
    Blocks are made (Gradio reads the folder then)."""
    own = not _USER_UPLOADS
    folder = Path(os.path.abspath(Path(data_dir) / "uploads")) if own else Path(os.path.abspath(_USER_UPLOADS))
    os.environ["GRADIO_TEMP_DIR"] = str(folder)
    old = time.time() - UPLOAD_MINUTES * 60
    gone = 0
    for d in folder.iterdir() if folder.is_dir() else []:
        try:
            if own or d.stat().st_mtime < old:
                shutil.rmtree(d, ignore_errors=True) if d.is_dir() and not d.is_symlink() else d.unlink()
                gone += 1
        except OSError:
            pass
    if gone:
        log.info("deleted %d upload(s) left by an earlier run in %s", gone, folder)
    return folder


def drop_upload(path) -> None:
    """Delete an uploaded file from Gradio's upload folder once it is read (and its folder, when emptied)."""
    if not path:
        return
    p = Path(os.path.abspath(str(path)))
    if not _inside(p, upload_folder()) or p.parent == upload_folder():
        return
    try:
        p.unlink(missing_ok=True)
        p.parent.rmdir()  # Gradio keeps each upload in a folder of its own
    except OSError:
        pass


class Files:
    """Write a visitor's files where :class:`FileGuard` serves them to that visitor only."""

    def __init__(self, store: SessionStore):
        self.store = store

    def _fresh(self, sid: str, *parts: str) -> Path:
        d = Path(os.path.abspath(self.store.files_dir(sid).joinpath(*map(_part, parts), secrets.token_hex(8))))
        d.mkdir(parents=True, exist_ok=True)
        return d

    def image(self, sid: str, img, doc_hash: str | None) -> str | None:
        """A page image (PIL) as a PNG of the document ``doc_hash`` (deleted with it); its path for gr.Image."""
        if img is None:
            return None
        shown = self.store.files_dir(sid) / "pages"
        self.prune(shown)
        p = self._fresh(sid, "pages", doc_hash or "none") / "page.png"
        img.save(p, format="PNG")
        return str(p)

    def download(self, sid: str, run: str, src: Path) -> str:
        """A copy of a run's file (deleted with the run) to offer for download."""
        self.prune(self.store.files_dir(sid) / "runs" / _part(run))
        return str(shutil.copy(src, self._fresh(sid, "runs", run) / src.name))

    def drop_document(self, sid: str, doc_hash: str) -> None:
        shutil.rmtree(self.store.files_dir(sid) / "pages" / _part(doc_hash), ignore_errors=True)

    def drop_run(self, sid: str, run: str) -> None:
        shutil.rmtree(self.store.files_dir(sid) / "runs" / _part(run), ignore_errors=True)

    @staticmethod
    def prune(folder: Path, hours: float = SHOWN_HOURS) -> None:
        """Delete the files written under ``folder`` more than ``hours`` ago (what was shown then is gone)."""
        if not folder.is_dir():
            return
        old = time.time() - hours * 3600
        for d in folder.glob("*/*") if folder.name == "pages" else folder.glob("*"):
            try:
                if d.is_dir() and d.stat().st_mtime < old:
                    shutil.rmtree(d, ignore_errors=True)
            except OSError:
                pass


def reader_cookie(header: str) -> str:
    """The reader token in a Cookie header ("" when none, or the header is malformed)."""
    cookie = SimpleCookie()
    try:
        cookie.load(header)
    except Exception:  # http.cookies raises CookieError, and worse, on odd input
        return ""
    return cookie[COOKIE].value if COOKIE in cookie else ""


class FileGuard:
    """ASGI middleware over Gradio's file route: a visitor's files to that visitor's browser only (404 for
    anyone else, as for a file that does not exist), nothing from the upload folder."""

    def __init__(self, app, store: SessionStore):
        self.app, self.store = app, store

    def guarded(self, raw_path: str) -> bool:
        """Whether ``raw_path`` names a file in a library's files folder (private: never kept by a cache)."""
        try:
            return any(_inside(p, root) for p in _forms(raw_path) for root in _forms(self.store.files_root))
        except (ValueError, OSError):
            return False

    def allowed(self, raw_path: str, cookie_header: str) -> bool:
        """Whether the file route may serve ``raw_path`` (as Gradio reads it: decoded once) to this cookie."""
        uploads, files = _forms(upload_folder()), _forms(self.store.files_root)
        try:
            asked = _forms(raw_path)
        except (ValueError, OSError):  # a NUL byte, a path too long: nothing to serve
            return False
        for p in asked:
            if any(_inside(p, u) for u in uploads):
                return False
            for root in files:
                if _inside(p, root):
                    key = p.relative_to(root).parts[:1]
                    if not key or not hmac.compare_digest(reader_cookie(cookie_header).encode(),
                                                          self.store.reader_token(key[0]).encode()):
                        return False
        return True

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            path = scope.get("path", "")
            route = next((r for r in FILE_ROUTES if r in path), None)  # behind a root path too
            if route is not None:
                headers = dict(scope.get("headers") or [])
                rest = path[path.index(route) + len(route):]
                if not self.allowed(rest, headers.get(b"cookie", b"").decode("latin-1")):
                    log.info("file refused: %s", path[:200])
                    await send({"type": "http.response.start", "status": 404,
                                "headers": [(b"content-type", b"text/plain; charset=utf-8"), NO_STORE]})
                    await send({"type": "http.response.body", "body": b"Not found"})
                    return
                if self.guarded(rest):
                    send = _no_store(send)
        await self.app(scope, receive, send)


def _no_store(send):
    """``send`` with ``Cache-Control: private, no-store`` put on the response (replacing Gradio's own)."""
    async def sending(msg):
        if msg.get("type") == "http.response.start":
            msg = {**msg, "headers": [(k, v) for k, v in msg.get("headers") or [] if k.lower() != b"cache-control"]
                   + [NO_STORE]}
        await send(msg)
    return sending
