"""Native hand-crafted metrics vs pyiqa, side by side in one run, on the same images.

    python -m bench.metrics.bench_native [--metrics piqe,niqe,brisque,ilniqe] [--device cpu] [--threads 2]

Three tables (seconds per image, best of `--repeats` after a warm-up):

1. speed-up: pyiqa (one image per call, as pyiqa is used) vs native at batch 1 and batch
   `--batch`, at `--size` (square images from a simulated-editor chain of skimage's coffee);
2. cost vs image size: both backends at each of `--sizes` (pyiqa skipped above `--pyiqa-max-size`
   for the slow metrics, to bound the run);
3. cost vs batch size: native at `--size` for each of `--batches`.

Every timed call's scores are compared: the run stops if native and pyiqa disagree by more
than 1e-2 relative. Results go to bench/results/metrics/native_<device>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, RESULTS, best_time, write_results

from banana100.testing.images import chain_images, flat_chain_images

SLOW_IN_PYIQA = ("ilniqe", "nrqm", "pi")


def per_image(metric: str, backend: str, images, batch: int, device: str, repeats: int) -> tuple[float, list[float]]:
    from banana100.metrics.engine.scorer import MetricScorer

    scorer = MetricScorer(metric, device=device, batch_size=batch, backend=backend)
    seconds, scores = best_time(lambda: scorer.score_arrays(images), repeats)
    return seconds / len(images), scores


def check(metric: str, native: list[float], pyiqa: list[float]) -> float:
    worst = max(abs(a - b) / max(abs(b), 1.0) for a, b in zip(native, pyiqa, strict=True))
    if worst > 1e-2:
        sys.exit(f"{metric}: native and pyiqa disagree by {worst:.2e} relative: benchmark stopped")
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", default="piqe,niqe,brisque,ilniqe")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--n", type=int, default=4, help="images per measurement")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--sizes", default="256,512,1024,2048")
    ap.add_argument("--pyiqa-max-size", type=int, default=1024)
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--params", type=Path, default=PARAMS)
    ap.add_argument("--flat", action="store_true",
                    help="images with flat areas and clipping (flat_chain_images); results/metrics/native_<device>_flat.json")
    ap.add_argument("--out", type=Path, default=None, help="the JSON file (default bench/results/metrics/native_<device>[_flat].json)")
    args = ap.parse_args()
    os.environ.setdefault("BANANA100_WEIGHTS", str(args.params))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    import pyiqa

    torch.set_num_threads(args.threads)
    metrics = args.metrics.split(",")
    env = {"python": platform.python_version(), "torch": torch.__version__, "pyiqa": pyiqa.__version__,
           "device": args.device, "torch_threads": torch.get_num_threads(), "cpus": os.cpu_count(),
           "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else None}
    results = {"command": "python -m bench.metrics.bench_native " + " ".join(sys.argv[1:]), "environment": env,
               "speedup": [], "sizes": [], "batches": []}

    make_images = flat_chain_images if args.flat else chain_images
    images = make_images(args.n, args.size)
    for m in metrics:
        # pyiqa itself scores one image a time on the CPU; on a GPU give it its own best batch too
        p, ps = per_image(m, "pyiqa", images, 1, args.device, args.repeats)
        n1, s1 = per_image(m, "native", images, 1, args.device, args.repeats)
        nb, sb = per_image(m, "native", images, args.batch, args.device, args.repeats)
        row = {"metric": m, "size": args.size, "pyiqa_s": p, "native_b1_s": n1, f"native_b{args.batch}_s": nb,
               "speedup_b1": p / n1, "speedup_batched": p / nb, "max_rel_diff": max(check(m, s1, ps), check(m, sb, ps))}
        results["speedup"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    for size in map(int, args.sizes.split(",")):
        imgs = make_images(2, size)
        for m in metrics:
            row = {"metric": m, "size": size, "native_s": per_image(m, "native", imgs, 1, args.device, args.repeats)[0]}
            if size <= args.pyiqa_max_size or m not in SLOW_IN_PYIQA:
                row["pyiqa_s"] = per_image(m, "pyiqa", imgs, 1, args.device, 1)[0]
            results["sizes"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)

    for b in map(int, args.batches.split(",")):
        imgs = make_images(max(b, 2), args.size)
        for m in metrics:
            row = {"metric": m, "size": args.size, "batch": b,
                   "native_s": per_image(m, "native", imgs, b, args.device, args.repeats)[0]}
            results["batches"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)

    out = args.out or RESULTS / "metrics" / f"native_{args.device.split(':')[0]}{'_flat' if args.flat else ''}.json"
    write_results(out, results)
    print(markdown(results, args.batch))
    print(f"\nwritten {out}", file=sys.stderr)


def markdown(r: dict, batch: int) -> str:
    env = r["environment"]
    lines = [f"`{r['command']}`; torch {env['torch']}, pyiqa {env['pyiqa']}, {env['torch_threads']} torch threads, "
             f"device {env['device']}{' (' + env['gpu'] + ')' if env['gpu'] else ''}. Seconds per image, best of the repeats.",
             "", f"| metric | size | pyiqa (s/img) | native batch 1 (s/img) | native batch {batch} (s/img) | "
             "speed-up batch 1 | speed-up batched | max rel. diff |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for x in r["speedup"]:
        lines.append(f"| {x['metric']} | {x['size']} | {x['pyiqa_s']:.3f} | {x['native_b1_s']:.3f} | "
                     f"{x[f'native_b{batch}_s']:.3f} | x{x['speedup_b1']:.1f} | x{x['speedup_batched']:.1f} | "
                     f"{x['max_rel_diff']:.1e} |")
    lines += ["", "Cost vs image size (batch 1, s/img; `-`: pyiqa not run at that size):", "",
              "| metric | " + " | ".join(f"{s} native / pyiqa" for s in sorted({x['size'] for x in r['sizes']})) + " |",
              "| --- |" + " --- |" * len({x['size'] for x in r['sizes']})]
    for m in dict.fromkeys(x["metric"] for x in r["sizes"]):
        cells = [f"{x['native_s']:.3f} / {x['pyiqa_s']:.3f}" if "pyiqa_s" in x else f"{x['native_s']:.3f} / -"
                 for x in r["sizes"] if x["metric"] == m]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    sizes = sorted({x["batch"] for x in r["batches"]})
    lines += ["", "Cost vs batch size (native, s/img):", "", "| metric | " + " | ".join(f"batch {b}" for b in sizes) + " |",
              "| --- |" + " --- |" * len(sizes)]
    for m in dict.fromkeys(x["metric"] for x in r["batches"]):
        lines.append(f"| {m} | " + " | ".join(f"{x['native_s']:.3f}" for x in r["batches"] if x["metric"] == m) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
