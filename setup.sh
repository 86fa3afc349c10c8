#!/usr/bin/env bash
# Create .venv/ in the repository root and install banana100 into it (editable).
#   bash setup.sh          library + CLI
#   bash setup.sh --space  ... plus Gradio, to run the Space (python space/app.py)
#   bash setup.sh --dev    ... plus what the tests need (includes the Space's)
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --upgrade pip "setuptools<81" wheel
# A known-good torch pair; on the project's build machines these two come from local disk.
.venv/bin/pip install -q torch==2.14.1 torchvision==0.29.1
if [ "${1:-}" = "--dev" ]; then
  .venv/bin/pip install -q -e ".[dev]"
elif [ "${1:-}" = "--space" ]; then
  .venv/bin/pip install -q -e ".[space]"
else
  .venv/bin/pip install -q -e .
fi
echo "banana100 installed in $(pwd)/.venv"
