#!/usr/bin/env bash
# The llama-cpp-python build a Hugging Face Space makes from requirements.txt — portable: GGML_NATIVE off, every
# x86-64 CPU variant built as a loadable backend (GGML_BACKEND_DL, GGML_CPU_ALL_VARIANTS), the best one for the
# running CPU loaded at start (pipeline/backends/ggml_cpu.py) — installed apart in .llama-portable/ (pip --target,
# put first on PYTHONPATH by tests/test_portable_build.py). Its flags are read from requirements.txt's line, so
# the test builds what a Space builds. The wheel is built once per version and flags and kept in the model cache
# (~/.cache/pdfqa/wheels, or PDFQA_MODEL_DIR): about 25 minutes on 2 cores the first time. scripts/setup.sh --dev
# runs it; the app's own venv keeps its native build.
set -euo pipefail
cd "$(dirname "$0")/.."
line=$(grep '^llama-cpp-python' requirements.txt)
spec=${line%% *}
defs=$(grep -o 'cmake\.define\.[A-Za-z0-9_]*=[A-Za-z0-9_]*' <<<"$line" | sed 's/^cmake\.define\./-D/' | tr '\n' ' ')
key=$(echo "$spec $defs" | sha256sum | cut -c1-16)
cache="${PDFQA_MODEL_DIR:-$HOME/.cache/pdfqa}/wheels/llama-portable-$key"
if ! ls "$cache"/*.whl >/dev/null 2>&1; then
  rm -rf "$cache.tmp" && mkdir -p "$cache.tmp"
  echo "setup-portable: building $spec with $defs (once)" >&2
  CMAKE_ARGS="$defs" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    .venv/bin/python -m pip wheel -q --no-cache-dir --no-deps -w "$cache.tmp" "$spec"
  rm -rf "$cache" && mv "$cache.tmp" "$cache"
fi
if [ "$(cat .llama-portable/.key 2>/dev/null)" != "$key" ]; then
  rm -rf .llama-portable
  .venv/bin/python -m pip install -q --no-deps --target .llama-portable "$cache"/*.whl
  echo "$key" > .llama-portable/.key
fi
ls .llama-portable/bin/libggml-cpu-*.so | sed 's|.*/libggml-cpu-||; s|\.so$||' | tr '\n' ' ' |
  sed 's/^/setup-portable: CPU variants: /; s/ $/\n/' >&2
