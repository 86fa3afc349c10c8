#!/usr/bin/env bash
# GPU check of the scoring engine: images/s at 2K and 1K beside pyiqa's own loop and the model alone,
# peak memory, agreement with pyiqa (same device and CPU), projected hours for 28,000 images x every
# metric on 1 and N GPUs (bench/gpu/gpu_check.py); flat-area agreement (bench/gpu/gpu_flat_check.py);
# VisualQuality-R1 (bench/gpu/gpu_vlm_check.py); the open editors' denoisers and pipelines
# (bench/generation/bench_editor_forward.py, bench/generation/bench_open_editor.py). Also runs on CPU: bash bench/gpu/gpu_check.sh --device cpu
# Extra arguments go to bench/gpu/gpu_check.py (e.g. --metrics piqe,topiq_nr --n 4).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${BENCH_OUT:-bench/results/gpu/gpu_check.json}"
device=cuda
if [[ " $* " == *" --device cpu "* ]]; then device=cpu; fi
if [ "$device" = "cuda" ] && ! python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no GPU visible: run with --device cpu" >&2; exit 2
fi
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
half=(); if [ "$device" = "cuda" ]; then half=(--half); fi  # float16 tolerance: GPU only
# flat areas: native vs pyiqa on the same device, pyiqa's device vs CPU (issue 12)
python -m bench.gpu.gpu_flat_check --device "$device" --threads "$(nproc)" --out "${BENCH_FLAT_OUT:-bench/results/gpu/gpu_flat_check_$device.json}"
# VisualQuality-R1 (issues 22, 31): transformers' loop over vision windows vs the batched windows, images/s
# and peak memory at 1K and 2K per batch size (and the free-memory size), hours for 28,000 images (real
# checkpoint if at hand, else the 7B architecture with random bf16 weights; --tiny on CPU). About 2 min.
if python -c "import transformers" 2>/dev/null; then
  tiny=(); if [ "$device" = "cpu" ]; then tiny=(--tiny --sides 224 --batch-sizes 4,auto,1 --n-small 2); fi
  python -m bench.gpu.gpu_vlm_check --device "$device" "${tiny[@]}" --out "${BENCH_VLM_OUT:-bench/results/gpu/gpu_vlm_check_$device.json}"
fi
# open editors (issue 31): the denoisers of Qwen-Image-Edit (20B) and FLUX.2 [dev] (32B) at their real
# sizes with random bf16 weights, one edit step's shapes at 1024x1024, batch 1 vs 4, and the cost of a step,
# a chain and 28,000 edits at BENCH_GPU_USD_PER_HOUR (toy configs on CPU). Needs ~70 GB of GPU memory;
# BENCH_EDITOR_FORWARD=0 skips it, and a failure (out of memory) does not stop the other checks.
if [ "${BENCH_EDITOR_FORWARD:-1}" != "0" ] && python -c "import diffusers" 2>/dev/null; then
  tiny=(); if [ "$device" = "cpu" ]; then tiny=(--tiny --repeats 1); fi
  python -m bench.generation.bench_editor_forward --device "$device" "${tiny[@]}" --gpu-usd-per-hour "${BENCH_GPU_USD_PER_HOUR:-3.50}" \
    --out "${BENCH_EDITOR_FORWARD_OUT:-bench/results/generation/editor_forward_$device.json}" || echo "editor forward check failed" >&2
fi
# open editors (issue 23): images/min batched vs one at a time through the runner, peak memory, USD per
# 1,000 steps, for each model in BENCH_EDITOR_MODELS (space-separated Hub ids or folders, weights already
# local; "tiny" is the tiny random FLUX.2 pipeline, the default on CPU), at BENCH_GPU_USD_PER_HOUR (default
# 3.50, an H100-class on-demand hour; state the price you use)
default_models=""; if [ "$device" = "cpu" ]; then default_models=tiny; fi
for model in ${BENCH_EDITOR_MODELS:-$default_models}; do
  if [ "$model" = "tiny" ]; then
    python -m bench.generation.bench_open_editor --chains 4 --steps 2 --size 128 --rounds 1 \
      --out bench/results/generation/open_editor_tiny.json
  else
    python -m bench.generation.bench_open_editor --model "$model" --size 1024 --chains 4 --steps 2 --rounds 2 \
      --inference-steps 28 --gpu-usd-per-hour "${BENCH_GPU_USD_PER_HOUR:-3.50}" \
      --out "bench/results/generation/open_editor_$(basename "$model").json"
  fi
done
exec python -m bench.gpu.gpu_check --out "$out" "${half[@]}" "$@"
