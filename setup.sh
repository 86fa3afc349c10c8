#!/usr/bin/env bash
# Create .venv/ in the repository root and install banana100 into it (editable).
#   bash setup.sh                the light core: CLI, dataset tools, protocol, native hand-crafted metrics
#   bash setup.sh --space        ... plus Gradio, to run the Space (python space/app.py)
#   bash setup.sh --all          ... plus every extra: deep (pyiqa), gemini (google-genai), space,
#                                    vlm (transformers: VisualQuality-R1), diffusers (open editors)
#   bash setup.sh --extras LIST  ... plus the extras in LIST (comma-separated: deep,gemini,openai,space,vlm,diffusers)
#   bash setup.sh --dev          every extra plus what the tests need (pytest, gradio_client, playwright)
#   bash setup.sh --cpu ...      torch from PyTorch's CPU-only index (no CUDA libraries: a far
#                                smaller download on a machine without an NVIDIA GPU); combine
#                                with any of the above, e.g. bash setup.sh --cpu --dev
# Install sizes of the core and of each extra: BENCHMARKS.md ("Install size").
set -euo pipefail
cd "$(dirname "$0")"
usage="usage: bash setup.sh [--cpu] [--space | --all | --dev | --extras deep,gemini,openai,space,vlm,diffusers]"
extras="" torch_index=()
while [ $# -gt 0 ]; do
  case "$1" in
    --space) extras="[space]" ;;
    --all) extras="[all]" ;;
    --dev) extras="[dev]" ;;
    --extras) extras="[${2:?--extras needs a comma-separated list: deep,gemini,openai,space,vlm,diffusers}]"; shift ;;
    --cpu) torch_index=(--index-url https://download.pytorch.org/whl/cpu) ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --upgrade pip "setuptools<81" wheel
# A known-good torch pair (torchvision is used by the deep metrics only); on the project's build
# machines these two come from local disk.
.venv/bin/pip install -q "${torch_index[@]}" torch==2.14.1 torchvision==0.29.1
.venv/bin/pip install -q -e ".${extras}"
# The editable install is an import hook that runs after the path search: a script beside the
# clone (the clone at ~/banana100, the script in ~) imported the clone folder as an empty
# namespace package `banana100` and failed with "No module named 'banana100.metrics.hub.module'".
# This .pth file (read after the hook's own, by name) moves the hook to the front.
.venv/bin/python - <<'PY'
import sysconfig, pathlib
pathlib.Path(sysconfig.get_path("purelib"), "banana100-editable-first.pth").write_text(
    "import sys; sys.meta_path.sort(key=lambda f: not getattr(f, '__module__', '').startswith('__editable___banana100'))\n")
PY
echo "banana100 installed in $(pwd)/.venv ($(.venv/bin/banana100 --version))"
