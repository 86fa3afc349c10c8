#!/usr/bin/env bash
# One GPU session: every GPU check the issues name, each bounded by its own time limit, results
# (logs + JSON) under $OUT. Made for a short lease on one GPU machine (the `device` tool): run
# from the repository root as `bash bench/gpu_session.sh`. A step that fails or runs out of time
# is logged and the next one starts; the summary lists each step's status and seconds.
#
#   .whl/          wheels for what the machine lacks (pyiqa, datasets, evaluate, diffusers, ...):
#                  installed into /tmp/site and put first on PYTHONPATH (bench/README.md)
#   .gpu-carry/shared   a copy of ../shared (parameter files, reference images), which does not
#                  travel with the working tree: linked as ../shared when that is absent
#   GPU_SESSION_STEPS   which steps to run (default: all, in the order below), or one of two
#                  groups that each fit one 600 s device call (with the wheels' install): "scoring"
#                  (env pytest_gpu engine_overhead precision gpu_check, 560 s at most) and "models"
#                  (env gpu_check_fast cnniqa_maniqa edit_damage_cost vlm editors, 560 s at most)
#   GPU_SESSION_DEVICE  cuda (default) or cpu: the CPU smoke run (tests/test_gpu_scripts.py)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-session}
mkdir -p "$OUT/r"
device=${GPU_SESSION_DEVICE:-cuda}
steps=${GPU_SESSION_STEPS:-env pytest_gpu engine_overhead precision gpu_check gpu_check_fast cnniqa_maniqa edit_damage_cost vlm editors}
case "$steps" in
  scoring) steps="env pytest_gpu engine_overhead precision gpu_check" ;;
  models) steps="env gpu_check_fast cnniqa_maniqa edit_damage_cost vlm editors" ;;
esac
if [ "$device" = cuda ] && [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed" >&2; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
if [ ! -e ../shared ] && [ -d .gpu-carry/shared ]; then ln -s "$PWD/.gpu-carry/shared" ../shared; fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
[ -d ../shared/iqa-params ] && export BANANA100_WEIGHTS=${BANANA100_WEIGHTS:-$(cd ../shared/iqa-params && pwd)}
PY=${PYTHON:-python3}

step() {  # step NAME SECONDS COMMAND...: run it under a time limit, log to $OUT/r/NAME.log
  local name=$1 limit=$2 start rc
  shift 2
  [[ " $steps " == *" $name "* ]] || return 0
  echo "== $name (limit ${limit} s): $*"
  start=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$OUT/r/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
  tail -n 25 "$OUT/r/$name.log"
}

step env 60 "$PY" -c "
import torch, transformers, importlib.util as u
print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else '', 'transformers', transformers.__version__)
print({m: bool(u.find_spec(m)) for m in ('pyiqa', 'diffusers', 'datasets', 'evaluate', 'clip', 'banana100')})"
# issue 30 part 1: CUDA == CPU with the global TF32 flags on. The gpu tests by file: the package runs
# from PYTHONPATH there (not installed), so test modules that read its package data cannot be collected
if [ "$device" = cuda ]; then
  step pytest_gpu 120 "$PY" -m pytest -q -p no:cacheprovider -m gpu --no-header -rs tests/metrics/test_stored_pyiqa_scores.py tests/metrics/test_precision.py \
    tests/metrics/engine/test_upload.py tests/metrics/engine/test_devices.py tests/metrics/engine/test_fastpaths.py tests/metrics/engine/test_engine.py tests/metrics/detector/test_edit_damage.py
fi
# issue 30 part 2: the engine against the model alone at 2K (and the engine before issue 30 beside it),
# over several batches: the upload of batch k+1 overlaps the compute of batch k only then
base=(); [ -f bench/engine_before_4fc4520.py ] && base=(--baseline bench/engine_before_4fc4520.py)
step engine_overhead 100 "$PY" -m bench.engine.bench_engine_overhead --device "$device" "${base[@]}" \
  --out "$OUT/r/engine_overhead.json" ${GPU_OVERHEAD_ARGS:---n 32 --batch-size 8 --side 2048 --rounds 2 --metrics piqe,brisque,niqe,ilniqe,edit_damage}
# fast against exact and CUDA against CPU per metric: the cards' precision data
step precision 80 "$PY" -m bench.gpu.gpu_precision_check --device "$device" --out "$OUT/r/precision.json" \
  --card-data "$OUT/r/precision_fast.json" ${GPU_PRECISION_ARGS:---side 512 --n 2 --metrics piqe,niqe,brisque,ilniqe,edit_damage --deep cnniqa,dbcnn,maniqa,liqe,clipiqa}
# every metric: engine beside pyiqa's loop and the model alone, the projection for 28,000 images
step gpu_check 200 "$PY" -m bench.gpu.gpu_check --device "$device" --out "$OUT/r/gpu_check" \
  ${GPU_CHECK_ARGS:---metrics all --sizes 2048 --n 32 --max-seconds 9 --vs-cpu off --gpus 1,2,4,8}
# the deep metrics again under --precision fast: the projection a user who opts in gets (MANIQA's
# exact float32 caps it near 12 img/s at 2K)
step gpu_check_fast 150 "$PY" -m bench.gpu.gpu_check --device "$device" --precision fast --out "$OUT/r/gpu_check_fast" \
  ${GPU_CHECK_FAST_ARGS:---metrics deep --sizes 2048 --n 32 --max-seconds 9 --vs-cpu off --gpus 1,2,4,8}
step cnniqa_maniqa 40 "$PY" -m bench.engine.bench_cnniqa_maniqa --device "$device" --out "$OUT/r/cnniqa_maniqa.json" \
  ${GPU_FAST_ARGS:---cnniqa-sizes 2048 --maniqa-sizes 2048 --maniqa-crops 20 --batch 8}
# edit_damage against native NIQE on the device (its whole-image masks path; the CPU's figures are in BENCHMARKS.md),
# and what edit_damage_rel measures beside it (--told-the-source)
step edit_damage_cost 40 "$PY" -m bench.detector.bench_edit_damage --device "$device" --told-the-source --out "$OUT/r/edit_damage_cost.json" \
  ${GPU_DETECTOR_ARGS:---sizes 1024,2048 --batches 1,8 --rounds 3}
step vlm 150 "$PY" -m bench.gpu.gpu_vlm_check --device "$device" --out "$OUT/r/gpu_vlm_check.json" ${GPU_VLM_ARGS:-}
step editors 120 "$PY" -m bench.generation.bench_editor_forward --device "$device" --repeats 2 --gpu-usd-per-hour 3.50 \
  --out "$OUT/r/editor_forward.json" ${GPU_EDITOR_ARGS:-}
tar czf "$OUT/results.tar.gz" -C "$OUT" r summary.txt 2>/dev/null
cat "$OUT/summary.txt"
