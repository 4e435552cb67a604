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

from pipeline.backends.vllm_engine import VLLM_VENV_PYTHON

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
        try:  # its children too (vLLM's engine core and worker hold the model)
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
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


# ---- vLLM's CPU build (.venv-vllm, scripts/setup-vllm.sh) -------------------------------------------------------
VLLM_PYTHON = VLLM_VENV_PYTHON  # the interpreter the vllm-cpu profile measures its dtype in
# vLLM's own logging quiet (the engines' KV cache and cores: the vllm-cpu profile's, vllm_engine.cpu_env)
VLLM_ENV = {"VLLM_LOGGING_LEVEL": "WARNING", "TOKENIZERS_PARALLELISM": "false"}


def require_vllm() -> None:
    """Skip with the reason where vLLM's CPU venv or its copy of the model is missing; under CI, fail instead
    (CI runs scripts/setup.sh --dev, which makes both)."""
    import pytest

    from pipeline.backends.vllm_model import converted_model
    from pipeline.errors import ModelMissing

    problem = None
    if not VLLM_PYTHON.exists():
        problem = f"vLLM's CPU build is not installed ({VLLM_PYTHON}): run `bash scripts/setup-vllm.sh`"
    else:
        try:
            converted_model()
        except ModelMissing as e:
            problem = str(e)
    if problem:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI: {problem}", pytrace=False)
        pytest.skip(problem)


def run_vllm_driver(stage: str, out_dir: Path, timeout: float = 900) -> dict:
    """``tests/vllm_driver.py STAGE`` under the vLLM venv (one engine, built once); its JSON results."""
    out = out_dir / f"{stage}.json"
    cmd = [str(VLLM_PYTHON), str(ROOT / "tests" / "vllm_driver.py"), stage, str(out)]
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **VLLM_ENV}, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:  # the driver's engine processes too, whatever happened
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        log.seek(0)
        proc.stderr = log.read()
    if not out.exists():
        raise RuntimeError(f"vLLM driver {stage!r} wrote nothing (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    got = json.loads(out.read_text())
    if not got.get("ok"):
        raise RuntimeError(f"vLLM driver {stage!r} failed:\n{got.get('error')}\n{proc.stderr[-2000:]}")
    return got
