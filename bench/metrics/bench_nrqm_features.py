"""NRQM's feature stage (and so PI's, whose cost it is), native vs pyiqa, side by side in one run.

    python -m bench.metrics.bench_nrqm_features [--sizes 256,512,1024] [--n 2] [--rounds 3]

NRQM cannot be timed end to end here: its regression forests come from `NRQM_model.mat`,
which this machine lacks. The feature stage (DCT, steerable-pyramid GSM and singular-value
features of three pyramid levels) is measured instead: pyiqa's code (as tests/fixtures/nativetools.py
runs it, one image per call) and `banana100.metrics.native.nrqm.NRQM.features` (batch 1), back to back
in shuffled order `--rounds` times on the same images; medians, seconds per image. The run
stops if any feature differs from pyiqa's by more than 1e-6 relative.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,512,1024")
    ap.add_argument("--n", type=int, default=2, help="images per size")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS / "metrics" / "nrqm_features.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from banana100.testing.images import chain_images
    from banana100.testing.nrqm_reference import pyiqa_nrqm_features

    from banana100.metrics.engine.scorer import keep_freed_memory, to_tensor
    from banana100.metrics.native import nrqm

    keep_freed_memory()  # as the engine runs; pyiqa's code runs under it too
    model = nrqm.NRQM(np.zeros(4), [], mode="pyiqa")  # no forests: features only
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        images = [to_tensor(a)[None] for a in chain_images(args.n, size)]
        ways = {"pyiqa": lambda x: pyiqa_nrqm_features(x), "native": lambda x: model.features(model.luminance(x))}
        with torch.no_grad():
            for x in images:
                for a, b in zip(ways["native"](x), ways["pyiqa"](x), strict=True):
                    diff = float(((a - b).abs() / b.abs().clamp(min=1e-12)).max())
                    if diff > 1e-6:
                        raise SystemExit(f"{size}: native features differ from pyiqa's by {diff:.2e}")
            times = {k: [] for k in ways}
            for _ in range(args.rounds):
                for k in random.sample(list(ways), 2):
                    t0 = time.perf_counter()
                    for x in images:
                        ways[k](x)
                    times[k].append((time.perf_counter() - t0) / len(images))
        theirs, ours = statistics.median(times["pyiqa"]), statistics.median(times["native"])
        rows.append(dict(size=size, pyiqa_s=theirs, native_s=ours, speedup=theirs / ours))
        print(f"{size:5d}px  pyiqa {theirs:.3f} s/img  native {ours:.3f} s/img  x{theirs / ours:.2f}", flush=True)
    command = "python -m bench.metrics.bench_nrqm_features " + " ".join(sys.argv[1:])
    write_results(args.out, {"command": command, "threads": args.threads, "torch": torch.__version__, "rows": rows})
    print(f"\n`{command}`; torch {torch.__version__}, {args.threads} threads; medians of {args.rounds} rounds\n")
    print("| size | pyiqa features (s/img) | native features (s/img) | speed-up |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['size']} | {r['pyiqa_s']:.3f} | {r['native_s']:.3f} | x{r['speedup']:.2f} |")


if __name__ == "__main__":
    main()
