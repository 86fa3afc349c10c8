"""Cost of the flat-area repair (issue 12): the native metrics before and after, like for like.

    git worktree add /tmp/before 329c1c7      # the commit before issue 12
    python bench/bench_flat_cost.py --before /tmp/before [--metrics brisque,niqe,piqe] [--rounds 3]

Each round times the native module (mode "pyiqa", CPU, batch 1, best of 3 after a warm-up) of
both checkouts in fresh subprocesses, one after the other, on the same images: 4 frames of a
simulated-editor chain of coffee at 512 px (bench_native.chain_images) and the same frames with a
clipped sky and contrast (bench_native.flat_chain_images). Reports the median over rounds of
after / before. Writes bench/results_flat_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PARAMS = REPO.parent / "shared" / "iqa-params"
FILES = {"brisque": ("brisque_live_allmodel", "brisque_live_allrange"), "niqe": ("niqe_modelparameters.mat",),
         "piqe": (), "ilniqe": ("ILNIQE_templateModel.mat",)}

CHILD = r"""
import sys, time, json, torch
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
torch.set_num_threads(2)
from pathlib import Path
from bench_native import chain_images, flat_chain_images
try:
    from banana100.metrics import native
    from banana100.metrics.engine import to_tensor
except ImportError:  # a checkout from before the regroup of issue 14
    from banana100 import native
    from banana100.engine import to_tensor
imgs = (flat_chain_images if {flat} else chain_images)(4, 512)
xs = [to_tensor(a)[None] for a in imgs]
model = native.build({metric!r}, {{f: Path({params!r}) / f for f in {files!r}}}, "pyiqa")
def run():
    with torch.no_grad():
        return [float(model(x)[0]) for x in xs]
run()
best = float("inf")
for _ in range(3):
    t = time.perf_counter(); scores = run(); best = min(best, time.perf_counter() - t)
print(json.dumps({{"seconds": best / len(xs), "scores": scores}}))
"""


def timed(root: Path, metric: str, flat: bool, params: Path) -> dict:
    code = CHILD.format(root=str(root), bench=str(REPO / "bench"), flat=flat, metric=metric,
                        params=str(params), files=FILES[metric])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="a checkout of the commit before the change")
    ap.add_argument("--metrics", default="brisque,niqe,piqe")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--params", type=Path, default=PARAMS)
    args = ap.parse_args()
    rows = []
    for metric in args.metrics.split(","):
        for flat in (False, True):
            ratios, before_s, after_s = [], [], []
            for _ in range(args.rounds):
                b = timed(args.before, metric, flat, args.params)
                a = timed(REPO, metric, flat, args.params)
                ratios.append(a["seconds"] / b["seconds"])
                before_s.append(b["seconds"])
                after_s.append(a["seconds"])
            diff = max(abs(x - y) / max(abs(y), 1.0) for x, y in zip(a["scores"], b["scores"]))
            row = {"metric": metric, "images": "flat" if flat else "chain", "median_after_over_before": statistics.median(ratios),
                   "ratios": ratios, "before_s": min(before_s), "after_s": min(after_s), "max_score_change": diff}
            rows.append(row)
            print(f"{metric:8s} {row['images']:6s} after/before x{row['median_after_over_before']:.2f} "
                  f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}); score change up to {diff:.1e}", flush=True)
    out = REPO / "bench" / "results_flat_cost.json"
    out.write_text(json.dumps({"command": "python bench/bench_flat_cost.py " + " ".join(sys.argv[1:]), "rows": rows},
                              indent=1) + "\n")
    print(f"written {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
