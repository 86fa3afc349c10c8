#!/usr/bin/env bash
# Create .venv/ in the repository root and install banana100 into it (editable).
#   bash setup.sh                the light core: CLI, dataset tools, protocol, native hand-crafted metrics
#   bash setup.sh --space        ... plus Gradio, to run the Space (python space/app.py)
#   bash setup.sh --all          ... plus every extra: deep (pyiqa), gemini (google-genai), space,
#                                    vlm (transformers: VisualQuality-R1), diffusers (open editors)
#   bash setup.sh --extras LIST  ... plus the extras in LIST (comma-separated: deep,gemini,openai,space,vlm,diffusers)
#   bash setup.sh --dev          every extra plus what the tests need (pytest, gradio_client, playwright)
# torch: the CUDA build (PyPI's, with its CUDA libraries) where an NVIDIA driver is present
# (`nvidia-smi` on PATH, or /proc/driver/nvidia), else the CPU build from PyTorch's CPU-only index
# (no CUDA libraries: a far smaller download); it says which it picked, and why. Where that index
# cannot be reached (an offline mirror of PyPI), it says so and installs the default build.
#   bash setup.sh --cpu ...      the CPU build, whatever the machine has; combine with any of the above
#   bash setup.sh --cuda ...     the CUDA build, whatever the machine has (e.g. to build an image
#                                that will run on a GPU machine)
#   bash setup.sh --dry-run ...  say which torch build it would install, and how; install nothing
# (BANANA100_TORCH_CPU_INDEX replaces the CPU index's address: a mirror of it.)
# Install sizes of the core and of each extra: BENCHMARKS.md ("Install size").
set -euo pipefail
cd "$(dirname "$0")"
usage="usage: bash setup.sh [--dry-run] [--cpu | --cuda] [--space | --all | --dev | --extras deep,gemini,openai,space,vlm,diffusers]"
extras="" build="" why="" dry=""
while [ $# -gt 0 ]; do
  case "$1" in
    --space) extras="[space]" ;;
    --all) extras="[all]" ;;
    --dev) extras="[dev]" ;;
    --extras) extras="[${2:?--extras needs a comma-separated list: deep,gemini,openai,space,vlm,diffusers}]"; shift ;;
    --cpu | --cuda)
      [ -z "$build" ] || [ "$build" = "${1#--}" ] || { echo "setup.sh: --cpu and --cuda: give one of them" >&2; exit 2; }
      build=${1#--} why="$1" ;;
    --dry-run) dry=1 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
PY=${PYTHON:-python3}
CPU_INDEX=${BANANA100_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
if [ -z "$build" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 || [ -e /proc/driver/nvidia/version ]; then
    build=cuda why="an NVIDIA driver is present"
  elif [ "$(uname -s)" != Linux ]; then
    build=default why="PyPI's torch has no CUDA libraries on $(uname -s)"
  else
    build=cpu why="no NVIDIA driver here: no nvidia-smi, no /proc/driver/nvidia; --cuda for the CUDA build"
  fi
fi
torch_index=()
if [ "$build" = cpu ]; then
  # a quick look first: where the index is out of reach, pip would retry it for minutes
  if "$PY" -c "import urllib.request; urllib.request.urlopen('$CPU_INDEX/torch/', timeout=10)" >/dev/null 2>&1; then
    torch_index=(--index-url "$CPU_INDEX")
  else
    build=default why="the CPU build was wanted ($why), but PyTorch's CPU index ($CPU_INDEX) cannot be reached: the configured index's build instead (on Linux, with the CUDA libraries)"
  fi
fi
echo "setup.sh: torch: the $build build ($why)"
if [ -n "$dry" ]; then
  echo "setup.sh: would run: pip install ${torch_index[*]}${torch_index[*]:+ }torch==2.14.1 torchvision==0.29.1, then pip install -e .${extras}"
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --upgrade pip "setuptools<81" wheel
# A known-good torch pair (torchvision is used by the deep metrics only); on the project's build
# machines these two come from local disk (the default build).
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
echo "banana100 installed in $(pwd)/.venv ($(.venv/bin/banana100 --version); torch $(.venv/bin/python -c 'import torch; print(torch.__version__, "with CUDA " + torch.version.cuda if torch.version.cuda else "CPU only")'))"
