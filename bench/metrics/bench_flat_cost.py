"""Cost of the flat-area repair (issue 12): the native metrics before and after, like for like.

    git worktree add /tmp/before 329c1c7      # the commit before issue 12
    python -m bench.metrics.bench_flat_cost --before /tmp/before [--metrics brisque,niqe,piqe] [--rounds 3]

Each round times the native module (mode "pyiqa", CPU, batch 1, best of 3 after a warm-up) of
both checkouts in fresh subprocesses, one after the other, on the same images: 4 frames of a
simulated-editor chain of coffee at 512 px (banana100.testing.images.chain_images, made once by
this checkout and handed to both as a file) and the same frames with a clipped sky and contrast
(flat_chain_images). Reports the median over rounds of
after / before. Writes bench/results/metrics/flat_cost.json.

`--cpu-time` (for a machine shared with other work): one long-lived process per checkout, one
thread each, the two asked in turn (which goes first alternates) to score the 4 images once,
`--rounds` times; each timing is the process's CPU time (time.process_time), which other jobs on
the machine inflate far less than wall time. `--pairs K` splits the rounds over K fresh pairs of
processes (a process's memory layout can make it faster or slower for its whole life). Reports the
ratio of the two minima and of the two medians. Writes bench/results/metrics/flat_cost_cpu_time.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, REPO, RESULTS, scratch_dir, write_results
FILES = {"brisque": ("brisque_live_allmodel", "brisque_live_allrange"), "niqe": ("niqe_modelparameters.mat",),
         "piqe": (), "ilniqe": ("ILNIQE_templateModel.mat",)}

_IMAGES: Path | None = None


def image_file() -> Path:
    """The 4 chain frames and 4 flat frames at 512 px, made once by this checkout, as an .npz both
    checkouts read (the older one may have no banana100.testing)."""
    global _IMAGES
    if _IMAGES is None:
        path = _IMAGES = scratch_dir("bench-flat-cost-") / "images.npz"
        from banana100.testing.images import chain_images, flat_chain_images

        arrays = {f"chain_{k}": a for k, a in enumerate(chain_images(4, 512))}
        arrays |= {f"flat_{k}": a for k, a in enumerate(flat_chain_images(4, 512))}
        np.savez(path, **arrays)
    return _IMAGES


CHILD = r"""
import sys, time, json, torch
sys.path.insert(0, {root!r})  # the checkout under test (the library of the other commit)
torch.set_num_threads(2)
from pathlib import Path
import numpy as np
saved = np.load({images!r})
try:
    from banana100.metrics import native
    from banana100.metrics.engine.scorer import keep_freed_memory, to_tensor
except ImportError:  # a checkout from before the regroup of issue 14
    from banana100 import native
    from banana100.engine import keep_freed_memory, to_tensor
keep_freed_memory()  # as the engine runs the metrics (bench/engine/bench_malloc.py)
imgs = [saved[f"{{'flat' if {flat} else 'chain'}}_{{k}}"] for k in range(4)]
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


WORKER = r"""
import sys, time, json, torch, warnings
sys.path.insert(0, {root!r})  # the checkout under test (the library of the other commit)
torch.set_num_threads(1)
warnings.simplefilter("ignore")
from pathlib import Path
import numpy as np
saved = np.load({images!r})
try:
    from banana100.metrics import native
    from banana100.metrics.engine.scorer import keep_freed_memory, to_tensor
except ImportError:  # a checkout from before the regroup of issue 14
    from banana100 import native
    from banana100.engine import keep_freed_memory, to_tensor
keep_freed_memory()  # as the engine runs the metrics (bench/engine/bench_malloc.py)
files = {files!r}
models = {{m: native.build(m, {{f: Path({params!r}) / f for f in files[m]}}, "pyiqa") for m in {metrics!r}}}
images = {{kind: [to_tensor(saved[f"{{kind}}_{{k}}"])[None] for k in range(4)] for kind in ("chain", "flat")}}
for line in sys.stdin:
    metric, kind = line.split()
    with torch.no_grad():
        t = time.process_time()
        scores = [float(models[metric](x)[0]) for x in images[kind]]
        seconds = time.process_time() - t
    print(json.dumps({{"seconds": seconds / len(images[kind]), "scores": scores}}), flush=True)
"""


def cpu_time_rows(before: Path, metrics: list[str], rounds: int, params: Path, pairs: int = 1) -> list[dict]:
    """Interleaved runs of long-lived workers (`--cpu-time`): `pairs` fresh pairs, `rounds` in all."""
    def start(root: Path) -> subprocess.Popen:
        code = WORKER.format(root=str(root), images=str(image_file()), files=FILES, params=str(params), metrics=metrics)
        return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(root), "PYTHONWARNINGS": "ignore"})

    def ask(worker: subprocess.Popen, metric: str, kind: str) -> dict:
        worker.stdin.write(f"{metric} {kind}\n")
        worker.stdin.flush()
        return json.loads(worker.stdout.readline())

    cases = [(metric, kind) for metric in metrics for kind in ("chain", "flat")]
    times = {case: ([], []) for case in cases}  # (before, after) CPU seconds an image
    scores = {}
    for pair in range(pairs):
        # a fresh pair of workers each time: one process's memory layout can make it faster or
        # slower for its whole life, which rounds within it cannot average out
        old, new = start(before), start(REPO)
        try:
            for case in cases:
                ask(old, *case), ask(new, *case)  # warm-up
                for r in range(max(1, rounds // pairs)):
                    # which goes first alternates: the second finds the caches the first left
                    order = ((0, old), (1, new)) if (r + pair) % 2 == 0 else ((1, new), (0, old))
                    for side, worker in order:
                        answer = ask(worker, *case)
                        times[case][side].append(answer["seconds"])
                        scores[case, side] = answer["scores"]
        finally:
            for worker in (old, new):
                worker.stdin.close()
                worker.wait()
    rows = []
    for metric, kind in cases:
        b_s, a_s = times[metric, kind]
        a, b = scores[(metric, kind), 1], scores[(metric, kind), 0]
        diff = max(abs(x - y) / max(abs(y), 1.0) for x, y in zip(a, b, strict=True))
        row = {"metric": metric, "images": kind, "min_after_over_min_before": min(a_s) / min(b_s),
               "median_after_over_median_before": statistics.median(a_s) / statistics.median(b_s),
               "worker_pairs": pairs, "before_cpu_s": b_s, "after_cpu_s": a_s, "max_score_change": diff}
        rows.append(row)
        print(f"{metric:8s} {kind:6s} after/before x{row['min_after_over_min_before']:.2f} (minima), "
              f"x{row['median_after_over_median_before']:.2f} (medians), {len(a_s)} rounds over {pairs} "
              f"worker pairs; score change up to {diff:.1e}", flush=True)
    return rows


def timed(root: Path, metric: str, flat: bool, params: Path) -> dict:
    code = CHILD.format(root=str(root), images=str(image_file()), flat=flat, metric=metric,
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
    ap.add_argument("--cpu-time", action="store_true",
                    help="interleaved long-lived workers, one thread, process CPU time (a shared machine)")
    ap.add_argument("--pairs", type=int, default=1,
                    help="with --cpu-time: start this many fresh pairs of workers, the rounds split between them")
    ap.add_argument("--out", type=Path, help="the JSON file (default bench/results/metrics/flat_cost[_cpu_time].json)")
    args = ap.parse_args()
    if args.cpu_time:
        rows = cpu_time_rows(args.before, args.metrics.split(","), args.rounds, args.params, args.pairs)
        out = args.out or RESULTS / "metrics" / "flat_cost_cpu_time.json"
        write_results(out, {"command": "python -m bench.metrics.bench_flat_cost " + " ".join(sys.argv[1:]), "rows": rows})
        print(f"written {out}", file=sys.stderr)
        return
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
            diff = max(abs(x - y) / max(abs(y), 1.0) for x, y in zip(a["scores"], b["scores"], strict=True))
            row = {"metric": metric, "images": "flat" if flat else "chain", "median_after_over_before": statistics.median(ratios),
                   "ratios": ratios, "before_s": min(before_s), "after_s": min(after_s), "max_score_change": diff}
            rows.append(row)
            print(f"{metric:8s} {row['images']:6s} after/before x{row['median_after_over_before']:.2f} "
                  f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}); score change up to {diff:.1e}", flush=True)
    out = args.out or RESULTS / "metrics" / "flat_cost.json"
    write_results(out, {"command": "python -m bench.metrics.bench_flat_cost " + " ".join(sys.argv[1:]), "rows": rows})
    print(f"written {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
