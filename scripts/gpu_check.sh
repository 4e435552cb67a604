#!/usr/bin/env bash
# GPU host check: index the PDFs, answer the questions, print the score, each stage's throughput and GPU memory.
#   bash scripts/gpu_check.sh [PROFILE] [extra args for python -m pipeline.gpu.check]
#   bash scripts/gpu_check.sh t4x2                         # all engines resident (default)
#   bash scripts/gpu_check.sh t4x2-paper                   # reference models, one stage per process
#   bash scripts/gpu_check.sh t4x2 --pdfs /data/unlp/pdfs --questions /data/unlp/questions.csv --limit 20
# Data: ../shared/unlp (pdfs/ + questions.csv) unless --pdfs/--questions say otherwise.
# Python: $PYTHON, else .venv-gpu/bin/python, else .venv/bin/python (see docs/deploy.md for the GPU install).
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE="${1:-t4x2}"
[ $# -gt 0 ] && shift
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no NVIDIA GPU visible (nvidia-smi missing or lists no device): run this on a GPU host" >&2
  exit 2
fi
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total --format=csv
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv-gpu/bin/python ]; then PY=.venv-gpu/bin/python; else PY=.venv/bin/python; fi
fi
"$PY" -c "import vllm, torch; print('vllm', vllm.__version__, '| torch', torch.__version__, 'CUDA', torch.version.cuda)" \
  || { echo "vLLM is not installed for $PY: pip install -r requirements-gpu.txt (docs/deploy.md)" >&2; exit 2; }
exec "$PY" -m pipeline.gpu.check --profile "$PROFILE" "$@"
