"""Fixtures for the browser tests: the real app in a subprocess, headless Debian Chromium.

Screenshots and measured timings go to $TEST_OUTPUT_DIR (default ``test-output/``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .harness import CHROMIUM, CHROMIUM_ARGS, ROOT, App


@pytest.fixture(scope="session")
def out_dir() -> Path:
    d = Path(os.environ.get("TEST_OUTPUT_DIR", ROOT / "test-output"))
    d.mkdir(parents=True, exist_ok=True)
    return d


class Timings:
    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def record(self, key: str, seconds: float) -> None:
        self.data[key] = round(seconds, 2)
        self.path.write_text(json.dumps(self.data, indent=2))
        print(f"\n[timing] {key}: {seconds:.2f} s")


@pytest.fixture(scope="session")
def timings(out_dir) -> Timings:
    return Timings(out_dir / "timings.json")


@pytest.fixture(scope="session")
def app(tmp_path_factory, out_dir, timings):
    a = App(tmp_path_factory.mktemp("appdata"), out_dir / "app.log")
    timings.record("app_start_seconds", a.start())
    yield a
    a.stop()


@pytest.fixture(scope="session")
def browser():
    """Headless Debian Chromium (never a downloaded browser build); the tests skip without it."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()
