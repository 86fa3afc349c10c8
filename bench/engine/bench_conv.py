"""The native metrics on CPU with and without `matlab.conv2d`'s convolution policy, side by side.

    python -m bench.engine.bench_conv [--metrics piqe,niqe,brisque,ilniqe] [--sizes 512,1024,2048] [--batches 1,4]

On CPU, `matlab.conv2d` convolves each image of a batch alone and cuts a large one into strips
of about `CONV_STRIP_BYTES`; with `CPU_CONV_POLICY = False` it is one plain `F.conv2d` call.
For each metric, size and batch, both run back to back in shuffled order `--rounds` times on the
same images (steps of a simulated-editor chain, as bench/metrics/bench_native.py); the table gives the
medians in seconds per image, their ratio, and the largest relative difference of the scores
(0 where the policy reproduces the plain call bit for bit).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, RESULTS, write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", default="piqe,niqe,brisque,ilniqe")
    ap.add_argument("--sizes", default="512,1024,2048")
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--params", type=Path, default=PARAMS)
    ap.add_argument("--out", type=Path, default=RESULTS / "engine" / "conv.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from banana100.testing.images import chain_images

    from banana100.metrics import native
    from banana100.metrics.engine.scorer import keep_freed_memory, to_tensor
    from banana100.metrics.native.matlab import core as matlab_core
    from banana100.metrics.table import get_metric

    keep_freed_memory()  # as the engine runs
    rows = []
    for metric in args.metrics.split(","):
        files = {wf.filename: args.params / wf.filename for wf in get_metric(metric).backend_files("native")}
        model = native.build(metric, files, mode="pyiqa")
        for size in [int(s) for s in args.sizes.split(",")]:
            for batch in [int(b) for b in args.batches.split(",")]:
                x = torch.stack([to_tensor(a) for a in chain_images(batch, size)])

                def run(policy: bool) -> torch.Tensor:
                    matlab_core.CPU_CONV_POLICY = policy
                    with torch.no_grad():
                        return model(x)

                scores = {p: run(p) for p in (True, False)}  # warm-up and the scores
                times = {True: [], False: []}
                for _ in range(args.rounds):
                    for p in random.sample([True, False], 2):
                        t0 = time.perf_counter()
                        run(p)
                        times[p].append(time.perf_counter() - t0)
                matlab_core.CPU_CONV_POLICY = True
                plain, policy = (statistics.median(times[p]) / batch for p in (False, True))
                a, b = scores[True].double(), scores[False].double()
                diff = float(((a - b).abs() / b.abs().clamp(min=1)).max())
                rows.append(dict(metric=metric, size=size, batch=batch, plain_s=plain, policy_s=policy,
                                 speedup=plain / policy, max_rel_diff=diff))
                print(f"{metric:8s} {size:5d} batch {batch}: plain {plain:7.3f} s/img, policy {policy:7.3f} s/img, "
                      f"x{plain / policy:.2f}, max rel diff {diff:.1e}", flush=True)
    command = "python -m bench.engine.bench_conv " + " ".join(sys.argv[1:])
    write_results(args.out, {"command": command, "threads": args.threads, "torch": torch.__version__,
                             "rounds": args.rounds, "rows": rows})
    print(f"\n`{command}`; torch {torch.__version__}, {args.threads} threads; medians of {args.rounds} rounds, s per image\n")
    print("| metric | size | batch | plain F.conv2d (s/img) | per image, in strips (s/img) | speed-up | max rel. diff of scores |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['metric']} | {r['size']} | {r['batch']} | {r['plain_s']:.3f} | {r['policy_s']:.3f} | "
              f"x{r['speedup']:.2f} | {r['max_rel_diff']:.1e} |")


if __name__ == "__main__":
    main()
