"""The engine with and without its allocator settings (`engine.keep_freed_memory`), side by side.

    python -m bench.engine.bench_malloc [--metrics piqe,niqe,brisque] [--backends native,pyiqa] [--n 16] [--sizes 512,2048]

glibc's default allocator returns large freed blocks to the OS, so each image's tensors are
page-faulted in again. Each round starts two fresh processes one after the other, one with
BANANA100_MALLOC_TUNING=0 and one without; each scores the same PNG files with
`MetricScorer(metric, device="cpu", backend=...).score(paths)` once to warm up, then `--repeats` times, and
reports its best time and its page faults per image. The speed-up is the median over rounds of
(untuned best / tuned best). Scores must be equal in both processes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, RESULTS, scratch_dir, write_results


def child(metric: str, backend: str, folder: str, repeats: int) -> None:
    """Runs in the subprocess: print one JSON line with best seconds, faults per image, scores."""
    import torch

    from banana100.metrics.engine.scorer import MetricScorer, keep_freed_memory
    from banana100.imageio import list_images

    torch.set_num_threads(2)
    paths = list_images(folder)
    scorer = MetricScorer(metric, device="cpu", backend=backend)
    scores = scorer.score(paths)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        scorer.score(paths)
        best = min(best, time.perf_counter() - t0)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / (repeats * len(paths))
    print(json.dumps({"tuned": keep_freed_memory(), "seconds": best, "faults_per_image": faults, "scores": scores}))


def run_child(metric: str, backend: str, folder: Path, repeats: int, tuned: bool, weights: str) -> dict:
    env = dict(os.environ, BANANA100_WEIGHTS=weights, HF_HUB_OFFLINE="1")
    env["BANANA100_MALLOC_TUNING"] = "1" if tuned else "0"
    out = subprocess.run([sys.executable, __file__, "--child", metric, backend, str(folder), str(repeats)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", default="piqe,niqe,brisque")
    ap.add_argument("--backends", default="native", help="native and/or pyiqa (pyiqa's own code, through the engine)")
    ap.add_argument("--n", type=int, default=16, help="images per size")
    ap.add_argument("--sizes", default="512,2048")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--weights", default=str(PARAMS))
    ap.add_argument("--out", type=Path, default=RESULTS / "engine" / "malloc.json")
    args = ap.parse_args()
    from bench.metrics.bench_metrics import make_images

    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        folder = scratch_dir(f"bench-malloc-{size}-")
        make_images(folder, args.n, size)
        for metric, backend in [(m, b) for m in args.metrics.split(",") for b in args.backends.split(",")]:
            pairs = []
            for _ in range(args.rounds):
                plain = run_child(metric, backend, folder, args.repeats, False, args.weights)
                tuned = run_child(metric, backend, folder, args.repeats, True, args.weights)
                if plain["scores"] != tuned["scores"]:
                    raise SystemExit(f"{metric} {size}: scores differ with and without the allocator settings")
                if not tuned["tuned"]:
                    raise SystemExit("the allocator settings were not applied (not glibc?)")
                pairs.append((plain, tuned))
            row = dict(metric=metric, backend=backend, size=size, n=args.n,
                       untuned_s=min(p["seconds"] for p, _ in pairs) / args.n,
                       tuned_s=min(t["seconds"] for _, t in pairs) / args.n,
                       speedup=float(np.median([p["seconds"] / t["seconds"] for p, t in pairs])),
                       untuned_faults=float(np.median([p["faults_per_image"] for p, _ in pairs])),
                       tuned_faults=float(np.median([t["faults_per_image"] for _, t in pairs])))
            rows.append(row)
            print(f"{metric:8s} {backend:6s} {size:5d}px  untuned {row['untuned_s'] * 1000:7.1f} ms/img ({row['untuned_faults']:6.0f} faults)"
                  f"  tuned {row['tuned_s'] * 1000:7.1f} ms/img ({row['tuned_faults']:4.0f} faults)  x{row['speedup']:.2f}",
                  flush=True)
    command = "python -m bench.engine.bench_malloc " + " ".join(sys.argv[1:])
    write_results(args.out, {"command": command, "rows": rows})
    print(f"\n`{command}`; best of {args.repeats} after a warm-up, {args.rounds} rounds, speed-up = median of untuned / tuned\n")
    print("| metric | backend | size | untuned (ms/img) | tuned (ms/img) | page faults per image, untuned / tuned | speed-up |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['metric']} | {r['backend']} | {r['size']} | {r['untuned_s'] * 1000:.1f} | {r['tuned_s'] * 1000:.1f} | "
              f"{r['untuned_faults']:.0f} / {r['tuned_faults']:.0f} | x{r['speedup']:.2f} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
