"""Throughput, peak memory and CPU-vs-GPU agreement of every metric the engine can build.

    bash bench/gpu_check.sh                      # on a GPU machine (cuda)
    python bench/gpu_check.py --device cpu --sizes 256 --n 2 --metrics piqe,cnniqa   # runs on CPU too

For each metric: images/s at each size (same-size batches through the engine, after a warm-up),
peak GPU memory for one image at each size (batch 1), the largest |GPU - CPU| score difference
on two 256x256 images, and the projected time for 28,000 images at the largest size.

Metrics whose files `banana100 weights check` finds use their real weights. The others are
built with random weights (banana100/testing/untrained.py): the cost in time and memory is the same as with
the real checkpoint, and so is the CPU/GPU numerical agreement of the arch, but the scores
themselves mean nothing (the `weights` column says which); CLIP metrics get a random CLIP of
the real RN50 / ViT-B/32 shapes. NRQM, PI and Q-Align cannot be
built without their files and are skipped when those are absent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchtools import write_results


def build(name: str, device: str, tmp: Path, backend: str | None = None):
    from banana100.metrics import weights
    from banana100.metrics.engine import MetricScorer

    if not weights.missing(name, backend):
        return MetricScorer(name, device=device, backend=backend), "real"
    from banana100.testing.untrained import UNTRAINED_KWARGS, build_untrained

    if name not in UNTRAINED_KWARGS:
        return None, "missing"
    return MetricScorer.from_model(name, build_untrained(name, tmp, device=device, full_clip=True), device=device), "random"


def images(n: int, side: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:side, 0:side] / side
    base = np.stack([np.sin(6 * xx) * 0.3 + 0.5, yy * 0.8 + 0.1, np.cos(5 * (xx + yy)) * 0.3 + 0.5], -1)
    return [np.clip((base + rng.normal(0, 0.05, base.shape)) * 255, 0, 255).astype(np.uint8) for _ in range(n)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--metrics", default="all")
    ap.add_argument("--sizes", default="1024,2048")
    ap.add_argument("--n", type=int, default=8, help="images per size for the throughput")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--images-total", type=int, default=28_000)
    ap.add_argument("--out", default=None, help="write results here (.json; a .md beside it)")
    ap.add_argument("--backends", default="native,pyiqa",
                    help="backends to measure for the metrics that have several (hand-crafted: native, pyiqa)")
    ap.add_argument("--half", action="store_true",
                    help="also measure max |float16 autocast - float32| per deep metric (the table's half_tolerance)")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from banana100.metrics.table import get_metric, parse_metric_list

    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    results = []
    wanted = args.backends.split(",")
    runs = [(name, b) for name in parse_metric_list(args.metrics)
            for b in get_metric(name).backends if b in wanted or len(get_metric(name).backends) == 1]
    for name, backend in runs:
        spec = get_metric(name)
        row = {"metric": name, "backend": backend, "batchable": spec.batchable or backend == "native"}
        t0 = time.perf_counter()
        try:
            scorer, kind = build(name, args.device, tmp, backend)
        except Exception as e:  # noqa: BLE001 - report and go on
            row.update(weights="error", error=f"build: {type(e).__name__}: {e}"[:300])
            results.append(row)
            print(json.dumps(row), flush=True)
            continue
        row.update(weights=kind, build_s=round(time.perf_counter() - t0, 2))
        if scorer is None:
            results.append(row)
            print(json.dumps(row), flush=True)
            continue
        scorer.batch_size = args.batch_size
        try:
            for side in sizes:
                imgs = images(args.n, side)
                scorer.score_arrays(imgs[:1])  # warm-up
                if cuda:
                    torch.cuda.synchronize(dev)
                t = time.perf_counter()
                scorer.score_arrays(imgs)
                if cuda:
                    torch.cuda.synchronize(dev)
                row[f"img_per_s_{side}"] = round(args.n / (time.perf_counter() - t), 3)
                if cuda:
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats(dev)
                    base = torch.cuda.memory_allocated(dev)
                    scorer.score_arrays(imgs[:1])
                    row[f"peak_gib_{side}"] = round((torch.cuda.max_memory_allocated(dev) - base) / 2**30, 3)
                row["batch_size_used"] = scorer.batch_size
            small = images(2, 256, seed=1)
            if cuda:
                on_dev = scorer.score_arrays(small)
                scorer.model.to("cpu")
                scorer.device = torch.device("cpu")
                on_cpu = scorer.score_arrays(small)
                row["max_abs_gpu_cpu"] = float(np.max(np.abs(np.array(on_dev) - np.array(on_cpu))))
                scorer.model.to(dev)
                scorer.device = dev
            if args.half and spec.family != "hand-crafted":  # their statistics need float32 at least
                full = scorer.score_arrays(small)
                scorer.allow_half(measured=False)
                row["max_abs_half"] = float(np.max(np.abs(np.array(scorer.score_arrays(small)) - np.array(full))))
                scorer.half = False
            largest = max(sizes)
            rate = row.get(f"img_per_s_{largest}")
            if rate:
                row["projected_h_28k"] = round(args.images_total / rate / 3600, 2)
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        results.append(row)
        print(json.dumps(row), flush=True)
        del scorer
        if cuda:
            torch.cuda.empty_cache()

    name = torch.cuda.get_device_name(dev) if cuda else "CPU"
    lines = [f"### Engine on {name} ({args.device}): {args.n} images per size, batch_size {args.batch_size}", "",
             f"`python bench/gpu_check.py --device {args.device} --sizes {args.sizes} --n {args.n}`; torch {torch.__version__}.",
             "weights: real = the metric's checkpoint; random = same arch with random weights (same cost, "
             "meaningless scores).", "",
             "| metric | backend | weights | " + " | ".join(f"img/s {s}" for s in sizes) + " | "
             + " | ".join(f"peak GiB {s}" for s in sizes)
             + f" | max abs(GPU-CPU) | max abs(half-float) | hours for {args.images_total} at {max(sizes)} |",
             "| --- | --- | --- | " + " | ".join(["---"] * (2 * len(sizes))) + " | --- | --- | --- |"]
    for r in results:
        cells = [str(r.get(f"img_per_s_{s}", "-")) for s in sizes] + [str(r.get(f"peak_gib_{s}", "-")) for s in sizes]
        agree, half = r.get("max_abs_gpu_cpu"), r.get("max_abs_half")
        lines.append(f"| {r['metric']} | {r['backend']} | {r.get('weights')} | " + " | ".join(cells)
                     + f" | {'-' if agree is None else f'{agree:.2g}'} | {'-' if half is None else f'{half:.2g}'}"
                     + f" | {r.get('projected_h_28k', r.get('error', '-'))} |")
    # the projection counts each metric once, with its default backend
    total = sum(r.get("projected_h_28k", 0) for r in results if r["backend"] == get_metric(r["metric"]).default_backend)
    counted = sum("projected_h_28k" in r for r in results if r["backend"] == get_metric(r["metric"]).default_backend)
    lines.append(f"\nProjected total for {args.images_total} images x {counted} "
                 f"metrics measured (default backends): {total:.1f} h on one device (divide by the number of GPUs "
                 "with accelerate).")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        out = write_results(args.out, results)  # makes the folder
        out.with_suffix(".md").write_text(text)
    return 0 if not any("error" in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
