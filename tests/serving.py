"""Real servers for the tests: started on 127.0.0.1, waited for within a bound, always torn down."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status < 500
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def server(cmd: list[str], ready_url: str, timeout: float = 180, env: dict | None = None):
    """Run ``cmd`` in its own process group until the block ends; fail (with its log) if it is not up in time."""
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True,
                            env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + timeout
        while not _up(ready_url):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                tail = log.read()[-3000:]
                raise RuntimeError(f"{cmd[:4]} did not come up at {ready_url} within {timeout:g}s "
                                   f"(exit {proc.poll()}):\n{tail}")
            time.sleep(0.3)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        log.close()


def chroma_cmd(path: Path, port: int) -> list[str]:
    exe = Path(sys.executable).parent / "chroma"
    return [str(exe), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)]


class JsonHandler(BaseHTTPRequestHandler):
    """A small in-test HTTP server's handler: each POST's JSON body goes to ``reply``, which answers with ``send``."""

    release: threading.Event  # set when the server stops (a handler that hangs waits on it)

    def log_message(self, *a):
        pass

    def send(self, code: int, body: bytes | dict):
        body = json.dumps(body).encode() if isinstance(body, dict) else body
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.reply(json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}"))

    def reply(self, req: dict) -> None:
        raise NotImplementedError


@contextmanager
def serve(handler: type, **attrs):
    """``handler`` (a :class:`JsonHandler`, with ``attrs`` set on a subclass) on a free loopback port; yields its URL."""
    cls = type("H", (handler,), {"release": threading.Event(), **attrs})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), cls)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        cls.release.set()
        httpd.shutdown()
        httpd.server_close()
