"""Metric modules vs the plain pyiqa loop, and evaluate's overhead, on the same images in one run.

    python -m bench.metrics.bench_metrics --metrics piqe,niqe,brisque --n 32 --size 512 \
        --weights ../shared/iqa-params --out /tmp/metrics_vs_loop.md

For each metric, on the same PNG files:
  pyiqa loop : `m = pyiqa.create_metric(name)`, then `m(path)` one image at a time (pyiqa reads the file);
  engine     : `MetricScorer(name).score(paths)` (threaded decode, same-size batches, the metric's
               default backend: native for the hand-crafted metrics);
  module     : `evaluate.load("metrics/<name>").compute(images=paths)`.
The largest relative difference between module and pyiqa loop is reported (|a - b| / max(|b|, 1);
0 for a pyiqa-backed module). After one warm-up of each, `--pairs` rounds run the three back to
back; speed-up = pyiqa loop / module and evaluate overhead = module / engine - 1 are the medians
of the rounds' ratios (robust to this shared machine's load swings); seconds are best rounds.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, REPO, scratch_dir


def make_images(folder: Path, n: int, size: int, seed: int = 0) -> list[Path]:
    """Photo-like test images: smooth gradients plus texture and noise, saved as PNG."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    paths = []
    for i in range(n):
        base = np.stack([np.sin(6 * xx + i) * 0.3 + 0.5, yy * 0.8 + 0.1, np.cos(5 * (xx + yy) + i) * 0.3 + 0.5], -1)
        texture = rng.normal(0, 0.04 + 0.02 * (i % 4), base.shape)
        img = np.clip((base + texture) * 255, 0, 255).astype(np.uint8)
        p = folder / f"img_{i:03d}.png"
        Image.fromarray(img).save(p)
        paths.append(p)
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", default="piqe,niqe,brisque")
    ap.add_argument("--n", type=int, default=32, help="images")
    ap.add_argument("--size", type=int, default=512, help="side of the square test images")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--weights", default=str(PARAMS), help="BANANA100_WEIGHTS folder")
    ap.add_argument("--out", default=None, help="append a markdown table here")
    ap.add_argument("--pairs", type=int, default=10,
                    help="rounds of pyiqa loop, engine and module back to back (medians of their ratios)")
    args = ap.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["BANANA100_WEIGHTS"] = args.weights
    import evaluate
    import pyiqa
    import torch

    from banana100.metrics import weights
    from banana100.metrics.engine.scorer import MetricScorer
    from banana100.metrics.weights import files_in_place
    from banana100.metrics.table import get_metric

    tmp = scratch_dir("bench-metrics-")
    paths = make_images(tmp, args.n, args.size)
    rows = []
    for name in [m.strip() for m in args.metrics.split(",") if m.strip()]:
        spec = get_metric(name)
        pairs = weights.resolved_files(name, allow_download=False, backend="pyiqa")
        kwargs = {spec.path_kwarg: str(pairs[0][1])} if pairs and spec.path_kwarg else {}
        with files_in_place(pairs[1:] if kwargs else pairs):
            plain = pyiqa.create_metric(name, device="cpu", **kwargs)

        def pyiqa_loop():
            return [float(plain(str(p)).reshape(-1)[0]) for p in paths]

        scorer = MetricScorer(name, device="cpu", batch_size=args.batch_size)
        module = evaluate.load(str(REPO / "metrics" / name))

        def module_scores():
            return module.compute(images=paths, device="cpu", batch_size=args.batch_size)["scores"]

        # rounds of pyiqa loop, engine and module back to back (after one warm-up of each): the
        # medians of the rounds' ratios resist this shared machine's load swings; the seconds
        # shown are each one's best round
        s_plain, s_engine, out = pyiqa_loop(), scorer.score(paths), module_scores()
        rounds = []
        for _ in range(args.pairs):
            t0 = time.perf_counter()
            pyiqa_loop()
            t1 = time.perf_counter()
            scorer.score(paths)
            t2 = time.perf_counter()
            module_scores()
            rounds.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
        t_plain, t_engine, t_module = (min(r[k] for r in rounds) for k in range(3))
        speedup = float(np.median([r[0] / r[2] for r in rounds]))
        overhead = float(np.median([r[2] / r[1] for r in rounds])) - 1
        diff = float(np.max(np.abs(np.array(out) - np.array(s_plain)) / np.maximum(np.abs(s_plain), 1.0)))
        rows.append(dict(metric=name, backend=scorer.backend, batchable=scorer.batchable, plain=t_plain, engine=t_engine, module=t_module,
                         speedup=speedup, overhead=overhead,
                         diff=diff, engine_diff=float(np.max(np.abs(np.array(out) - np.array(s_engine))))))
        r = rows[-1]
        print(f"{name:8s} pyiqa loop {t_plain:7.2f}s  engine {t_engine:7.2f}s  module {t_module:7.2f}s  "
              f"speed-up x{speedup:5.2f}  evaluate overhead {100 * overhead:+5.1f}%  "
              f"max rel|module-pyiqa| {diff:.3g}", flush=True)

    cpu = f"{os.cpu_count()} CPU threads visible, torch threads {torch.get_num_threads()}, {platform.processor() or platform.machine()}"
    lines = [
        f"### Metric modules vs the pyiqa loop ({args.n} PNG images {args.size}x{args.size}, CPU, batch_size {args.batch_size})",
        "",
        f"`python -m bench.metrics.bench_metrics --metrics {args.metrics} --n {args.n} --size {args.size} --pairs {args.pairs} --batch-size {args.batch_size}`; {cpu};"
        f" pyiqa {pyiqa.__version__}, torch {torch.__version__}, evaluate {evaluate.__version__}. {args.pairs} rounds of loop, engine and module back to back after a warm-up; seconds: each one's best round.",
        "",
        "| metric | backend | batched | pyiqa per-image loop (s) | engine (s) | module (s) | speed-up (median of loop / module) | evaluate overhead (median of module / engine - 1) | max rel. diff (module vs pyiqa) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(f"| {r['metric']} | {r['backend']} | {'yes' if r['batchable'] else 'no (one at a time)'} | {r['plain']:.2f} | {r['engine']:.2f} | "
                     f"{r['module']:.2f} | x{r['plain'] / r['module']:.2f} | {100 * r['overhead']:+.1f} % | {r['diff']:.3g} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
