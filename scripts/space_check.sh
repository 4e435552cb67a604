#!/usr/bin/env bash
# Start the app as a Hugging Face Space would and report what it did (docs/deploy.md, "The free CPU Space").
#   bash scripts/space_check.sh PYTHON [PORT]
# PYTHON: the interpreter of a venv made like the Space's (pip install -r requirements.txt, plus the
# `spaces` package the Space image has). The app runs from a clean checkout of HEAD (git archive: no .venv,
# no data), with SPACE_ID and SYSTEM=spaces set and a fresh model folder; /data is used if it is there
# and writable. Prints: Tesseract's languages, seconds until the page answers and until the model is
# assembled and sha256-checked, where libraries and runs live, and any error in the app's log.
set -u
PY=$1; PORT=${2:-7872}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
APP=$(mktemp -d); MD=$(mktemp -d)
git -C "$ROOT" archive HEAD | tar -x -C "$APP"
cd "$APP"
echo "python: $($PY -V); /data: $(ls -ld /data 2>&1)"
echo "tesseract: $($PY -c 'from pipeline.documents.ingest import tessdata; print(tessdata("ukr+eng"))')"
start=$(date +%s)
SPACE_ID=someone/pdf-qa SYSTEM=spaces PDFQA_MODEL_DIR=$MD $PY app.py --port "$PORT" > app.log 2>&1 &
pid=$!
for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 1; done
echo "page: HTTP $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/") after $(( $(date +%s) - start )) s"
for _ in $(seq 900); do ls "$MD"/*.sha256 >/dev/null 2>&1 && break; sleep 1; done
echo "model: $(cat "$MD"/*.sha256 2>/dev/null || echo 'not assembled') after $(( $(date +%s) - start )) s"
grep -m1 "libraries and runs in" app.log
kill "$pid"; wait "$pid" 2>/dev/null
grep -n "ERROR\|Error:" app.log || echo "no errors in the app's log"
rm -rf "$APP" "$MD"
