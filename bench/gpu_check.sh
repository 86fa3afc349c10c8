#!/usr/bin/env bash
# GPU check of the scoring engine: images/s at 2K and 1K beside pyiqa's own loop and the model alone,
# peak memory, agreement with pyiqa (same device and CPU), projected hours for 28,000 images x every
# metric on 1 and N GPUs (bench/gpu_check.py); flat-area agreement (bench/gpu_flat_check.py);
# VisualQuality-R1 (bench/gpu_vlm_check.py). Also runs on CPU: bash bench/gpu_check.sh --device cpu
# Extra arguments go to bench/gpu_check.py (e.g. --metrics piqe,topiq_nr --n 4).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${BENCH_OUT:-bench/results_gpu_check.json}"
device=cuda
if [[ " $* " == *" --device cpu "* ]]; then device=cpu; fi
if [ "$device" = "cuda" ] && ! python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no GPU visible: run with --device cpu" >&2; exit 2
fi
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
half=(); if [ "$device" = "cuda" ]; then half=(--half); fi  # float16 tolerance: GPU only
# flat areas: native vs pyiqa on the same device, pyiqa's device vs CPU (issue 12)
python bench/gpu_flat_check.py --device "$device" --threads "$(nproc)" --out "${BENCH_FLAT_OUT:-bench/results_gpu_flat_check_$device.json}"
# VisualQuality-R1 (issue 22): images/s and peak memory at 1K and 2K per batch size, hours for 28,000
# images (real checkpoint if at hand, else the 7B architecture with random bf16 weights; --tiny on CPU)
if python -c "import transformers" 2>/dev/null; then
  tiny=(); if [ "$device" = "cpu" ]; then tiny=(--tiny --sides 224 --batch-sizes 1,4 --n 4); fi
  python bench/gpu_vlm_check.py --device "$device" "${tiny[@]}" --out "${BENCH_VLM_OUT:-bench/results_gpu_vlm_check_$device.json}"
fi
# open editors (issue 23): images/min batched vs one at a time, peak memory, USD per 1,000 steps, for
# each model in BENCH_EDITOR_MODELS (space-separated Hub ids or folders, weights already local), at
# BENCH_GPU_USD_PER_HOUR (default 3.50, an H100-class on-demand hour; state the price you use)
for model in ${BENCH_EDITOR_MODELS:-}; do
  python bench/bench_open_editor.py --model "$model" --size 1024 --chains 4 --steps 2 --rounds 2 \
    --inference-steps 28 --gpu-usd-per-hour "${BENCH_GPU_USD_PER_HOUR:-3.50}" \
    --out "bench/results_open_editor_$(basename "$model").json"
done
exec python bench/gpu_check.py --out "$out" "${half[@]}" "$@"
