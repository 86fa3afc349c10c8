#!/usr/bin/env bash
# Create .venv/ in the repository root and install banana100 into it (editable).
#   bash setup.sh                the light core: CLI, dataset tools, protocol, native hand-crafted metrics
#   bash setup.sh --space        ... plus Gradio, to run the Space (python space/app.py)
#   bash setup.sh --all          ... plus every extra: deep (pyiqa), gemini (google-genai), space
#   bash setup.sh --extras LIST  ... plus the extras in LIST (comma-separated: deep,gemini,space,diffusers)
#   bash setup.sh --dev          every extra plus what the tests need (pytest, gradio_client, playwright)
# Install sizes of the core and of each extra: BENCHMARKS.md ("Install size").
set -euo pipefail
cd "$(dirname "$0")"
case "${1:-}" in
  "") extras="" ;;
  --space) extras="[space]" ;;
  --all) extras="[all]" ;;
  --dev) extras="[dev]" ;;
  --extras) extras="[${2:?--extras needs a comma-separated list: deep,gemini,space,diffusers}]" ;;
  *) echo "usage: bash setup.sh [--space | --all | --dev | --extras deep,gemini,space,diffusers]" >&2; exit 2 ;;
esac
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --upgrade pip "setuptools<81" wheel
# A known-good torch pair (torchvision is used by the deep metrics only); on the project's build
# machines these two come from local disk.
.venv/bin/pip install -q torch==2.14.1 torchvision==0.29.1
.venv/bin/pip install -q -e ".${extras}"
echo "banana100 installed in $(pwd)/.venv ($(.venv/bin/banana100 --version))"
