"""webapp/files.py (issue 54): private files are marked never to be cached; uploads an earlier process left are
deleted at start."""
from __future__ import annotations

import asyncio
import os
import threading
import time

from webapp import files as F
from webapp.sessions import SessionStore


def _serve(guard, path: str, cookie: str = "") -> list[dict]:
    sent: list[dict] = []

    async def send(msg):
        sent.append(msg)

    headers = [(b"cookie", cookie.encode())] if cookie else []
    scope = {"type": "http", "path": path, "headers": headers}
    # in a thread of its own: the browser tests' Playwright (sync API) leaves an event loop running in this one
    t = threading.Thread(target=asyncio.run, args=(guard(scope, None, send),))
    t.start()
    t.join(30)
    return sent


def test_a_library_s_files_are_sent_with_no_store_and_other_files_as_gradio_sends_them(tmp_path):
    s = SessionStore(tmp_path, lambda root: None, closer=lambda p: None, secret="k")
    sid = s.new_id()
    mine = s.files_dir(sid) / "pages" / "d" / "t" / "page.png"

    async def app(scope, receive, send):  # Gradio's file route, as far as headers go
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"image/png"), (b"cache-control", b"public, max-age=3600")]})
        await send({"type": "http.response.body", "body": b"png"})

    guard = F.FileGuard(app, s)
    cookie = f"{F.COOKIE}={s.reader_token(s.files_key(sid))}"
    ok = _serve(guard, f"/gradio_api/file={mine}", cookie)
    assert ok[0]["status"] == 200 and dict(ok[0]["headers"])[b"cache-control"] == b"private, no-store"
    assert [k for k, _ in ok[0]["headers"]].count(b"cache-control") == 1
    refused = _serve(guard, f"/gradio_api/file={mine}")
    assert refused[0]["status"] == 404 and dict(refused[0]["headers"])[b"cache-control"] == b"private, no-store"
    other = _serve(guard, "/gradio_api/file=/srv/app/assets/logo.png")  # not a library's: Gradio's headers
    assert dict(other[0]["headers"])[b"cache-control"] == b"public, max-age=3600"


def test_uploads_an_earlier_process_left_are_deleted_at_start(tmp_path, monkeypatch):
    monkeypatch.delenv("GRADIO_TEMP_DIR", raising=False)
    monkeypatch.setattr(F, "_USER_UPLOADS", None)
    left = tmp_path / "uploads" / "3f2a" / "leaflet.pdf"
    left.parent.mkdir(parents=True)
    left.write_bytes(b"%PDF")
    folder = F.use_upload_folder(tmp_path)
    assert folder == tmp_path / "uploads" and os.environ["GRADIO_TEMP_DIR"] == str(folder)
    assert F.upload_folder() == folder and not left.exists()
    # a folder GRADIO_TEMP_DIR names may be shared: only uploads older than the promise go there
    shared = tmp_path / "shared-tmp"
    monkeypatch.setattr(F, "_USER_UPLOADS", str(shared))
    old, new = shared / "a" / "old.pdf", shared / "b" / "new.pdf"
    for f in (old, new):
        f.parent.mkdir(parents=True)
        f.write_bytes(b"%PDF")
    past = time.time() - (F.UPLOAD_MINUTES + 1) * 60
    os.utime(old.parent, (past, past))
    assert F.use_upload_folder(tmp_path) == shared
    assert not old.exists() and new.exists()
