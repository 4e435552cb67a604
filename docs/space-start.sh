#!/usr/bin/env bash
# Hugging Face Space (Docker, one GPU) start script — a template, not run here (see docs/deploy.md).
# Starts the t4x2 engines as vLLM servers on 127.0.0.1 (with the PDFQA_* overrides from the environment,
# e.g. PDFQA_TENSOR_PARALLEL=1), waits for each, then the web app with PDFQA_PROFILE=remote on port 7860.
set -euo pipefail
cd /app
mkdir -p /data/app /data/logs
# the commands come from the profile itself, so servers and app agree on models, lengths and ports
mapfile -t CMDS < <(PDFQA_PROFILE= .venv/bin/python -m pipeline.gpu.serve --profile t4x2 --host 127.0.0.1)
for cmd in "${CMDS[@]}"; do
  port=$(sed -E 's/.*--port ([0-9]+).*/\1/' <<<"$cmd")
  echo "starting: $cmd"
  bash -c "exec $cmd" >"/data/logs/vllm-$port.log" 2>&1 &
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 2
  done
  curl -sf "http://127.0.0.1:$port/health" >/dev/null || { tail -50 "/data/logs/vllm-$port.log"; exit 1; }
done
exec env PDFQA_PROFILE=remote .venv/bin/python app.py --host 0.0.0.0 --port 7860 --data-dir /data/app
