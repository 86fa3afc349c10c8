#!/usr/bin/env bash
# A newcomer's first commands, timed in a fresh clone with no ../shared beside it (issue 21):
#   1. bash setup.sh                  (the README's first command, set-up half)
#   2. .venv/bin/banana100 demo       (its main-job half: no parameter files, so PIQE only)
#   3. the demo again with BANANA100_WEIGHTS=SHARED_PARAMS (PIQE, NIQE, BRISQUE), when given
# and the venv's size. Usage: bash bench/install/bench_fresh_clone.sh [BRANCH] [SHARED_PARAMS]
# Writes bench/results/install/fresh_clone.json (in the repository it was run from) and prints it.
# Where pip takes torch from local wheels (the project's build machines) the set-up time is far
# below a user's, who downloads torch: it says what the steps cost here, not on a laptop.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
branch="${1:-$(git -C "$repo" rev-parse --abbrev-ref HEAD)}"
params="${2:-}"
work="$(mktemp -d /tmp/banana100-fresh-XXXXXX)"
git clone -q --branch "$branch" "$repo" "$work/banana100"
cd "$work/banana100"
t0=$(date +%s.%N); bash setup.sh > "$work/setup.log" 2>&1; t1=$(date +%s.%N)
.venv/bin/banana100 demo > "$work/demo.log" 2>&1; t2=$(date +%s.%N)
if [ -n "$params" ]; then
  BANANA100_WEIGHTS="$params" .venv/bin/banana100 demo --out demo_weights > "$work/demo_weights.log" 2>&1
fi
t3=$(date +%s.%N)
venv_mb=$(du -sb .venv | awk '{print int($1 / 1e6)}')
python3 - "$repo/bench/results/install/fresh_clone.json" <<PY
import json, sys
out = {"commit": "$(git rev-parse --short HEAD)", "date": "$(date -u +%FT%TZ)", "cpus": $(nproc),
       "setup_s": round($t1 - $t0, 1), "demo_piqe_only_s": round($t2 - $t1, 1),
       "demo_with_params_s": round($t3 - $t2, 1) if "$params" else None, "venv_mb": $venv_mb,
       "demo_stderr": open("$work/demo.log").read().splitlines()[-12:],
       "report_table": [l for l in open("$work/banana100/demo_output/report/report.md") if l.startswith("| ")][:6],
       "report_table_with_params": [l for l in open("$work/banana100/demo_weights/report/report.md")
                                    if l.startswith("| ")][:6] if "$params" else None}
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out, indent=1))
PY
echo "fresh clone left in $work (remove it when done)"
