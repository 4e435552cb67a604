"""Fixtures for the browser tests: the real app in a subprocess, headless Debian Chromium.

Screenshots and measured timings go to $TEST_OUTPUT_DIR (default ``test-output/``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .harness import CHROMIUM, CHROMIUM_ARGS, ROOT, App


def missing_browser() -> str | None:
    """Why the browser tests cannot run here (None when they can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (bash scripts/setup.sh --dev)"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    return None


# In CI a missing browser is a failure, not a skip: a run must not be green with no browser test run. (Raised while
# this conftest loads, before any test module of this folder can skip itself.)
if os.environ.get("CI", "").lower() in ("true", "1") and missing_browser():
    pytest.fail(f"CI={os.environ['CI']}: {missing_browser()}; the browser tests cannot run", pytrace=False)


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
    """Headless Debian Chromium (never a downloaded browser build); the tests skip without it (fail under CI)."""
    if missing_browser():
        pytest.skip(missing_browser())
    from playwright import sync_api
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()
