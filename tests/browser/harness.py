"""The app under test in a subprocess, and opening it in a browser context (used by conftest and tests)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("PDFQA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-quic", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class App:
    """``python app.py`` on a free loopback port with its own data dir."""

    def __init__(self, data_dir: Path, log_path: Path, extra_args: list[str] | None = None,
                 env: dict[str, str] | None = None):
        self.data_dir, self.log_path = data_dir, log_path
        self.extra_args = extra_args or []
        self.extra_env = env or {}
        self.proc: subprocess.Popen | None = None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 120) -> float:
        """Start and wait until the page is served; returns seconds from process start."""
        env = {**os.environ, "PDFQA_DATA_DIR": str(self.data_dir), "GRADIO_ANALYTICS_ENABLED": "False",
               "PYTHONUNBUFFERED": "1"}
        env.pop("PDFQA_SHARED_LIBRARY", None)
        env.pop("GRADIO_TEMP_DIR", None)  # set by an in-process build_app of another test: the app picks its own
        env.update(self.extra_env)
        self.log = open(self.log_path, "a")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(self.port),
                                      *self.extra_args], cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        while time.perf_counter() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the app exited with {self.proc.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(self.url, timeout=2) as r:
                    if r.status == 200 and b"<html" in r.read(2000).lower():
                        return time.perf_counter() - t0
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"the app did not serve its page in {timeout} s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if getattr(self, "log", None):
            self.log.close()


def open_app(browser, app, context=None):
    """A page on the app (in ``context``, or a fresh context = a new visitor), its session ready."""
    ctx = context or browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = ctx.new_page()
    page.set_default_timeout(30_000)
    page.goto(app.url)
    page.wait_for_function("() => !!localStorage.getItem('pdfqa-session')", timeout=60_000)
    page.wait_for_timeout(500)
    return page


def visitor_fixture(name: str):
    """A module-scoped fixture ``name``: one visitor's page on the module's ``app`` (its own browser context),
    closed after the module."""
    import pytest

    @pytest.fixture(scope="module", name=name)
    def visitor(browser, app):
        page = open_app(browser, app)
        yield page
        page.context.close()

    return visitor
