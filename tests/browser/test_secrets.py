"""Issue 54: the key that signs library ids, reader cookies and files keys never leaves the server; nothing
computed from what a visitor can see opens another library or its files; private files are not cached; a server
killed during an upload leaves no upload copy behind and names the documents it never stored.

The app runs here on a data folder of its own (it is killed and started again), apart from the other modules'.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urljoin

import pytest

from . import docs as D
from .harness import App, open_app
from .test_browser import ANSWER_TIMEOUT, READY, expect, status_rows, tab, upload, wait_until
from .test_privacy import on_disk, uploads_of

TOKEN = re.compile(r"[A-Za-z0-9_\-]{12,}")  # anything that could serve as a key, an id or a token


def _get(url: str, cookie: str | None = None) -> tuple[int, dict, str]:
    req = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode("utf-8", "replace")


def _mac(key: str, purpose: str, value: str) -> str:
    """The server's HMAC (webapp/sessions.py) under a guessed key."""
    return hmac.new(key.encode(), f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def _forged_id(key: str) -> str:
    rand = secrets.token_hex(8)
    return rand + _mac(key, "id", rand)[:16]


@pytest.fixture(scope="module")
def own_app(tmp_path_factory, out_dir):
    a = App(tmp_path_factory.mktemp("secrets-data"), out_dir / "app-secrets.log")
    a.start()
    yield a
    a.stop()


def _cookieless_answers(app: App) -> dict[str, str]:
    """Every page and API answer a client without a cookie gets: the page, its config, the API's description,
    and each named endpoint called with empty inputs (after ``on_load``, in that client's own session)."""
    from gradio_client import Client

    got = {path: _get(urljoin(app.url, path))[2] for path in
           ("/", "/config", "/gradio_api/info", "/gradio_api/openapi.json", "/gradio_api/app_id", "/theme.css",
            "/manifest.json")}
    client = Client(app.url, verbose=False, download_files=False)
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert "/on_load" in api and len(api) >= 5, sorted(api)
    for name in ["/on_load", *sorted(set(api) - {"/on_load"})]:
        try:
            got[f"api {name}"] = json.dumps(client.submit(*[None] * len(api[name]["parameters"]),
                                                          api_name=name).result(timeout=120), default=str)
        except Exception as e:  # a refusal is an answer too: its text is scanned
            got[f"api {name}"] = f"{type(e).__name__}: {e}"
    return got


def test_nothing_a_cookieless_client_can_fetch_holds_the_signing_key(own_app):
    key = (own_app.data_dir / ".server-key").read_text().strip()
    browser_key = (own_app.data_dir / ".browser-secret").read_text().strip()
    assert len(key) >= 64 and key != browser_key
    assert (own_app.data_dir / ".server-key").stat().st_mode & 0o077 == 0
    answers = _cookieless_answers(own_app)
    assert {k: len(v) for k, v in answers.items() if key in v or key.upper() in v} == {}
    # Gradio does send the BrowserState's key to every page (it encrypts localStorage in the browser): it is public,
    # so it must not be, or sign, anything the server trusts
    assert browser_key in answers["/config"]


@pytest.mark.timeout(900)
def test_a_cookie_and_an_id_computed_from_everything_a_visitor_sees_are_refused(own_app, browser, tmp_path):
    app = own_app
    ann = open_app(browser, app)
    pdf = tmp_path / "muzei.pdf"
    pdf.write_bytes(D.museum_pdf())
    upload(ann, "upload", [pdf])
    wait_until(ann, lambda: status_rows(ann) and status_rows(ann)[0][1] in READY, 300, "the upload")
    tab(ann, "Ask")
    ann.locator("#block textarea").fill(D.block(D.MUSEUM_Q))
    ann.locator("#fill").click()
    ann.locator("#ask").click()
    expect(ann.locator("#answer")).to_contain_text("Answer:", timeout=ANSWER_TIMEOUT)
    img = ann.locator("#evidence-crop img").first
    expect(img).to_be_visible(timeout=60_000)
    url = urljoin(app.url, img.get_attribute("src"))
    files_key = on_disk(url).relative_to((app.data_dir / "files").resolve()).parts[0]
    stored = ann.evaluate("() => localStorage.getItem('pdfqa-session')")  # encrypted with the public key
    reader = next(c["value"] for c in ann.context.cookies() if c["name"] == "pdfqa-reader")
    key = (app.data_dir / ".server-key").read_text().strip()  # read from the disk: the test's, no visitor's
    sid = next(d.name for d in (app.data_dir / "sessions").iterdir() if _mac(key, "files", d.name)[:32] == files_key)

    # everything a visitor can see: the cookie-less answers, ann's own page, her id (as stored and decrypted, as the
    # page does with the key Gradio sends it), cookie and file URL
    seen = " ".join([*_cookieless_answers(app).values(), ann.content(), stored, sid, reader, url])
    candidates = set(TOKEN.findall(seen)) | {(app.data_dir / ".browser-secret").read_text().strip()}
    assert len(candidates) > 50

    # ann's own cookie opens her file, marked never to be cached; nothing else does
    status, headers, _ = _get(url, f"pdfqa-reader={reader}")
    assert status == 200 and headers.get("cache-control") == "private, no-store"
    status, headers, _ = _get(url)
    assert status == 404 and headers.get("cache-control") == "private, no-store"
    # no candidate computes ann's reader cookie (checked against the true one, computed with the key on the disk)
    true_reader = _mac(key, "reader", files_key)[:32]
    assert true_reader == reader
    assert [c for c in candidates if _mac(c, "reader", files_key)[:32] == true_reader] == []
    # and over HTTP: cookies computed under the most likely keys (the browser state's, the visitor's own tokens)
    for c in [(app.data_dir / ".browser-secret").read_text().strip(), sid, reader, files_key]:
        assert _get(url, f"pdfqa-reader={_mac(c, 'reader', files_key)[:32]}")[0] == 404, c

    # an id signed under any candidate is not issued by this server: on_load gives a fresh library instead
    from gradio_client import Client

    client = Client(app.url, verbose=False, download_files=False)
    assert client.predict(sid, api_name="/on_load")[0] == sid  # the control: ann's own id is hers
    for c in [(app.data_dir / ".browser-secret").read_text().strip(), sid, reader, files_key]:
        forged = _forged_id(c)
        assert client.predict(forged, api_name="/on_load")[0] != forged, c
    rand = secrets.token_hex(8)
    assert [c for c in candidates if _mac(c, "id", rand)[:16] == _mac(key, "id", rand)[:16]] == []
    ann.context.close()


@pytest.mark.timeout(900)
def test_a_server_killed_during_an_upload_leaves_no_copy_and_names_what_it_never_stored(own_app, browser,
                                                                                         tmp_path, out_dir):
    app = own_app
    page = open_app(browser, app)
    uploaded = uploads_of(page)
    names = ["first.pdf", "long.pdf", "third.pdf"]
    (tmp_path / names[0]).write_bytes(D.museum_pdf())
    # long enough that the server is still reading it when killed
    (tmp_path / names[1]).write_bytes(D.ukrainian_pdf("Довгий звіт", [(f"Розділ {i}", D.MUSEUM_FILLER * 6)
                                                                     for i in range(1, 61)], footer=None))
    (tmp_path / names[2]).write_bytes(D.parking_pdf())
    upload(page, "upload", [tmp_path / n for n in names])
    wait_until(page, lambda: (lambda r: len(r) == 3 and r[0][1] in READY and r[1][1] not in (*READY, "failed"))(
        status_rows(page)), 300, "the first document stored while the second is read", poll_ms=100)
    assert len(uploaded) == 3 and all(Path(p).exists() for p in uploaded)  # copies kept until the batch ends
    os.killpg(app.proc.pid, signal.SIGKILL)
    app.proc.wait(30)

    app.start()
    assert [p for p in uploaded if Path(p).exists()] == []  # an earlier process's uploads, deleted at start
    page.reload()
    page.wait_for_function("() => !!localStorage.getItem('pdfqa-session')", timeout=60_000)
    msg = page.locator("#library-message")
    expect(msg).to_contain_text("Not indexed: upload them again", timeout=30_000)
    expect(msg).to_contain_text("long.pdf")
    expect(msg).to_contain_text("third.pdf")
    assert "first.pdf" not in msg.inner_text()  # it was stored: listed, not named lost
    expect(page.locator("#documents")).to_contain_text("first.pdf")
    expect(page.locator(".toast-body").filter(has_text="Not indexed: long.pdf, third.pdf")).to_be_visible()
    page.set_viewport_size({"width": 1280, "height": 720})
    page.screenshot(path=str(out_dir / "library-interrupted.png"))
    page.reload()  # said once
    page.wait_for_function("() => !!localStorage.getItem('pdfqa-session')", timeout=60_000)
    page.wait_for_timeout(2000)
    assert "Not indexed" not in page.locator("#library-message").inner_text()
    page.context.close()
