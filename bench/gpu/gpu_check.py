"""The engine on a device, beside pyiqa's own loop and the model alone, and the hours it projects (issue 30).

    python -m bench.gpu.gpu_check --out $OUT/gpu_check                    # cuda: every metric, 2048 and 1024 px, 32 images
    python -m bench.gpu.gpu_check --metrics native,cnniqa,maniqa --max-seconds 40 --gpus 1,4,8 --out $OUT/gc
    python -m bench.gpu.gpu_check --device cpu --metrics piqe,cnniqa --sizes 256 --n 2 --out /tmp/gc   # runs on CPU too

For each metric and size, in one run on one device with the same images:

- engine: `MetricScorer.score_arrays` (batches of --batch-size), images/s in a steady state: after
  a warm-up on one whole batch, over --n images (several batches, so that the upload of batch
  k+1 can overlap the compute of batch k), and its peak device memory (weights included; cuda only);
- pyiqa: pyiqa's own model called one image at a time (`model(tensor[None])`, what pyiqa's users
  run), images/s, and the largest |engine - pyiqa| over the images both scored;
- model alone: the engine's model on a float batch already on the device, and the upload of the
  uint8 batch alone: `host_share` = 1 - model time / engine time is the engine's host work;
- off the CPU (or with --vs-cpu on), `vs_pyiqa_cpu`: the largest |engine on the device - pyiqa on CPU| on two 256 px images
  (on a GPU "pyiqa's score" means its CPU score: issue 30).

Then the projection: hours for --images-total images at the largest size x every metric measured,
on one device and on each N of --gpus (data-parallel, each process every N-th image: linear).

Weights: a metric whose files `banana100 weights check` finds uses them ("real"); a deep metric
without them is pyiqa's arch with random weights at pyiqa's real crop counts (hyperIQA 25,
MANIQA 20, TReS 50; CLIP at its real RN50 / ViT-B/32 shape): same cost, meaningless scores, and
the engine-vs-pyiqa difference still checks the engine. NRQM, PI and Q-Align cannot be built
without their files and are listed as not measured.

--max-seconds bounds each metric: sizes run largest first, and once a metric is over its time the
rest of its measurements are skipped (the row says which). Results are written after each metric
(a killed run keeps what it measured): --out DIR gets gpu_check.json and gpu_check.md (or
--out FILE.json and the .md beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import environment, write_results

SMALL = 256  # side of the images for the CPU agreement check


def images(n: int, side: int, seed: int = 0) -> list[np.ndarray]:
    """Smooth colour fields with a little noise: every metric scores them without warnings."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:side, 0:side] / side
    base = np.stack([np.sin(6 * xx) * 0.3 + 0.5, yy * 0.8 + 0.1, np.cos(5 * (xx + yy)) * 0.3 + 0.5], -1)
    return [np.clip((base + rng.normal(0, 0.05, base.shape)) * 255, 0, 255).astype(np.uint8) for _ in range(n)]


def select(text: str) -> list[str]:
    """'all' (every metric of the table), 'native', 'deep' or names, comma-separated, in order."""
    from banana100.metrics.table import METRICS, get_metric

    out: list[str] = []
    for word in (w.strip() for w in text.split(",") if w.strip()):
        if word == "all":
            names = list(METRICS)
        elif word in ("native", "deep"):
            names = [n for n, s in METRICS.items() if (s.default_backend == "native") == (word == "native")]
        else:
            names = [get_metric(word).name]
        out += [n for n in names if n not in out]
    return out


def build(name: str, device: str, tmp: Path, precision: str = "exact"):
    """(engine scorer, pyiqa's own model for its loop or None, weights) for `name` on `device`."""
    from banana100.metrics import weights
    from banana100.metrics.engine import fastpaths
    from banana100.metrics.engine.scorer import MetricScorer
    from banana100.metrics.table import get_metric
    from banana100.testing.untrained import UNTRAINED_KWARGS, build_untrained

    spec = get_metric(name)
    if not weights.missing(name):
        scorer = MetricScorer(name, device=device, precision=precision)
        if not spec.in_pyiqa:
            return scorer, None, "real"
        if scorer.backend == "pyiqa":
            return scorer, fastpaths.original(scorer.model), "real"
        if weights.missing(name, "pyiqa"):
            return scorer, None, "real"
        return scorer, MetricScorer(name, device=device, backend="pyiqa").model, "real"
    if name in UNTRAINED_KWARGS:
        model = build_untrained(name, tmp, device=device, full_clip=True, real_crops=True)
        return MetricScorer.from_model(name, model, device=device, precision=precision), model, "random"
    return None, None, "missing: " + ", ".join(weights.missing(name))


class Clock:
    """Wall time with the device synchronised, and one metric's time budget."""

    def __init__(self, torch, dev, budget: float):
        self.torch, self.cuda, self.dev = torch, dev.type == "cuda", dev
        self.deadline = time.perf_counter() + budget

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.dev)

    def time(self, fn):
        self.sync()
        t = time.perf_counter()
        out = fn()
        self.sync()
        return out, time.perf_counter() - t

    @property
    def over(self) -> bool:
        return time.perf_counter() > self.deadline


def first_score(out) -> float:
    if isinstance(out, (tuple, list)):
        out = out[0]
    return float(out.detach().float().reshape(-1)[0])


def measure_side(row: dict, scorer, pyiqa_model, imgs, clock: Clock, torch, dev) -> None:
    """The engine, the model alone, the upload and pyiqa's loop on `imgs`, into `row`."""
    from banana100.metrics.engine.scorer import to_tensor

    n = len(imgs)
    cuda = dev.type == "cuda"
    # warm-up on one whole batch: kernels, the device allocator's blocks and the pinned host
    # buffer of that batch size are then cached, as in a long run. (Until Dec 2026 the warm-up
    # was one image followed by empty_cache(), and --n was one batch: the engine's figure was one
    # batch's latency with cudaMalloc and cudaHostAlloc in it, and no batch to overlap with.)
    scorer.score_arrays(imgs[: scorer.batch_size])
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    ours, t_engine = clock.time(lambda: scorer.score_arrays(imgs))
    row.update(engine_img_s=round(n / t_engine, 3), batch_size_used=scorer.batch_size)
    if cuda:
        row["engine_peak_gib"] = round(torch.cuda.max_memory_allocated(dev) / 2**30, 3)
    batch = imgs[: scorer.batch_size] if scorer.batchable else imgs[:1]
    stack = lambda: torch.from_numpy(np.stack(batch)).to(dev).permute(0, 3, 1, 2).float().div_(255)  # noqa: E731
    if clock.over:
        row["skipped"] = "model alone, pyiqa loop: over --max-seconds"
        return
    t_up = min(clock.time(stack)[1] for _ in range(3))  # cheap: best of three
    row["upload_img_s"] = round(len(batch) / t_up, 3)
    xb = stack()
    with torch.no_grad():
        t_model = min(clock.time(lambda xb=xb: scorer.model(xb))[1] for _ in range(1 if clock.over else 2))
    del xb
    row["model_img_s"] = round(len(batch) / t_model, 3)
    row["host_share"] = round(1 - (t_model / len(batch)) / (t_engine / n), 3)
    if pyiqa_model is None:
        return
    if clock.over:
        row["skipped"] = "pyiqa loop: over --max-seconds"
        return
    with torch.no_grad():
        first_score(pyiqa_model(to_tensor(imgs[0])[None].to(dev)))  # warm-up at the measured size
        theirs: list[float] = []
        clock.sync()
        t = time.perf_counter()
        for im in imgs:  # at least one image, then as many as the budget allows
            theirs.append(first_score(pyiqa_model(to_tensor(im)[None].to(dev))))
            if clock.over:
                break
        t_loop = time.perf_counter() - t
    diffs = [abs(a - b) for a, b in zip(ours, theirs, strict=True)]
    row.update(pyiqa_img_s=round(len(theirs) / t_loop, 3), pyiqa_images=len(theirs),
               engine_vs_pyiqa=round((n / t_engine) / (len(theirs) / t_loop), 2),
               max_abs_vs_pyiqa=max(diffs), max_rel_vs_pyiqa=max(d / max(abs(b), 1) for d, b in zip(diffs, theirs, strict=True)))


def vs_pyiqa_cpu(name: str, scorer, pyiqa_model, tmp: Path, torch) -> float | None:
    """max |engine on its device - pyiqa on CPU| on two small images (same weights)."""
    from banana100.metrics.engine.scorer import to_tensor

    small = images(2, SMALL, seed=1)
    ours = scorer.score_arrays(small)
    cpu_tmp = tmp / "cpu"  # its own files (LIQE caches its text features there): none made on the device
    cpu_tmp.mkdir(exist_ok=True)
    cpu_scorer, cpu_model, _ = build(name, "cpu", cpu_tmp)
    if cpu_model is None:
        return None
    cpu_model.load_state_dict(pyiqa_model.state_dict())  # random weights: the device model's, exactly
    with torch.no_grad():
        theirs = [first_score(cpu_model(to_tensor(im)[None])) for im in small]
    del cpu_scorer, cpu_model
    return max(abs(a - b) for a, b in zip(ours, theirs, strict=True))


def project(rows: list[dict], names: list[str], side: int, total: int, gpus: list[int]) -> dict:
    """Hours for `total` images at `side` x every metric measured there, engine and pyiqa's loop."""
    at = {r["metric"]: r for r in rows if r.get("side") == side and "engine_img_s" in r}
    hours = {m: round(total / r["engine_img_s"] / 3600, 3) for m, r in at.items()}
    loop = {m: round(total / r["pyiqa_img_s"] / 3600, 3) for m, r in at.items() if r.get("pyiqa_img_s")}
    one = sum(hours.values())
    return {"images": total, "side": side, "hours_per_metric": hours, "not_measured": [m for m in names if m not in at],
            "hours_one_device": round(one, 2), "hours_by_devices": {str(g): round(one / g, 2) for g in gpus},
            # pyiqa's loop against the engine on the metrics both were measured on
            "pyiqa_loop_hours": round(sum(loop.values()), 2), "engine_hours_same_metrics": round(sum(hours[m] for m in loop), 2),
            "pyiqa_loop_metrics": sorted(loop), "pyiqa_loop_hours_per_metric": loop}


def table(doc: dict) -> str:
    a, p = doc["args"], doc["projection"]
    cols = ["metric", "weights", "side", "engine img/s", "pyiqa img/s", "engine/pyiqa", "model img/s", "host share",
            "upload img/s", "peak GiB", "max abs(engine-pyiqa)", "max abs(vs pyiqa CPU)"]
    keys = ["engine_img_s", "pyiqa_img_s", "engine_vs_pyiqa", "model_img_s", "host_share", "upload_img_s",
            "engine_peak_gib", "max_abs_vs_pyiqa", "vs_pyiqa_cpu"]
    fmt = lambda v: "-" if v is None else f"{v:.2g}" if isinstance(v, float) and abs(v) < 0.01 else str(v)  # noqa: E731
    lines = [f"### Engine on {doc['device_name']} ({a['device']}): {a['n']} images per size, batch_size {a['batch_size']}",
             "", f"`python -m bench.gpu.gpu_check {' '.join(doc['argv'])}`; torch {doc['environment']['torch']}.", "",
             "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for r in doc["rows"]:
        cells = [r["metric"], r.get("weights", "-"), str(r.get("side", "-"))] + [fmt(r.get(k)) for k in keys]
        if "error" in r or "skipped" in r:
            cells[-1] += f" ({r.get('error') or r.get('skipped')})"
        lines.append("| " + " | ".join(cells) + " |")
    by = ", ".join(f"{h} h on {g}" for g, h in p["hours_by_devices"].items())
    lines += ["", f"Projection, {p['images']} images at {p['side']} px x {len(p['hours_per_metric'])} metrics measured "
              f"(engine): {p['hours_one_device']} h on one device; {by} (linear in the number of devices). "
              f"On the {len(p['pyiqa_loop_metrics'])} of them pyiqa's loop ran on: pyiqa {p['pyiqa_loop_hours']} h, "
              f"engine {p['engine_hours_same_metrics']} h.",
              "Hours per metric (engine): " + ", ".join(f"{m} {h}" for m, h in p["hours_per_metric"].items()) + "."]
    if p["not_measured"]:
        lines.append(f"Not measured at {p['side']} px: {', '.join(p['not_measured'])}.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda when visible)")
    ap.add_argument("--metrics", default="all", help="all, native, deep or names, comma-separated")
    ap.add_argument("--sizes", default="2048,1024", help="square sides, measured largest first")
    ap.add_argument("--n", type=int, default=32, help="images per size (several batches: a steady state)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-seconds", type=float, default=120.0, help="time budget per metric (then its rest is skipped)")
    ap.add_argument("--images-total", type=int, default=28_000)
    ap.add_argument("--gpus", default="1,4,8", help="the device counts to project for: N or a list")
    ap.add_argument("--vs-cpu", choices=("auto", "on", "off"), default="auto",
                    help="the engine on the device vs pyiqa on CPU (auto: unless the device is the CPU)")
    ap.add_argument("--precision", choices=("exact", "fast"), default="exact",
                    help="the engine's precision (fast: TF32 / bf16 autocast where the metric allows; issue 30)")
    ap.add_argument("--half", action="store_true",
                    help="also measure max |float16 autocast - float32| per deep metric (the table's half_tolerance)")
    ap.add_argument("--out", type=Path, default=None, help="a folder (gpu_check.json, .md) or a .json file")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from banana100.metrics.table import get_metric

    dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = dev.type == "cuda"
    vs_cpu = args.vs_cpu == "on" or (args.vs_cpu == "auto" and dev.type != "cpu")
    sizes = sorted({int(s) for s in args.sizes.split(",")}, reverse=True)
    gpus = [int(g) for g in args.gpus.split(",")]
    if len(gpus) == 1 and gpus[0] > 1:
        gpus = [1, gpus[0]]
    names = select(args.metrics)
    out = None
    if args.out is not None:
        out = args.out if args.out.suffix == ".json" else args.out / "gpu_check.json"
    tmp = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    try:  # the built models' files go there (hundreds of MB a run): removed however the run ends
        doc = {"argv": sys.argv[1:] if argv is None else list(argv), "args": {**vars(args), "device": str(dev), "out": str(args.out)},
               "device_name": torch.cuda.get_device_name(dev) if cuda else "CPU", "environment": environment(), "rows": []}
        rows = doc["rows"]

        def emit(row):
            rows.append(row)
            print(json.dumps(row), flush=True)
            doc["projection"] = project(rows, names, sizes[0], args.images_total, gpus)
            if out is not None:
                write_results(out, doc)  # makes the folder

        for name in names:
            t0 = time.perf_counter()
            try:
                scorer, pyiqa_model, kind = build(name, str(dev), tmp, args.precision)
            except Exception as e:  # noqa: BLE001 - report and go on
                emit({"metric": name, "weights": "error", "error": f"build: {type(e).__name__}: {e}"[:300]})
                continue
            if scorer is None:
                emit({"metric": name, "weights": kind})
                continue
            scorer.batch_size = args.batch_size
            clock = Clock(torch, dev, args.max_seconds)
            base = {"metric": name, "weights": kind, "backend": scorer.backend, "batchable": scorer.batchable,
                    "build_s": round(time.perf_counter() - t0, 2)}
            for side in sizes:
                row = dict(base, side=side)
                if clock.over:
                    emit(dict(row, skipped="over --max-seconds"))
                    continue
                try:
                    measure_side(row, scorer, pyiqa_model, images(args.n, side), clock, torch, dev)
                    if side == sizes[-1] and vs_cpu and pyiqa_model is not None and not clock.over:
                        row["vs_pyiqa_cpu"] = vs_pyiqa_cpu(name, scorer, pyiqa_model, tmp, torch)
                    if side == sizes[-1] and args.half and get_metric(name).family != "hand-crafted":
                        small = images(2, SMALL, seed=1)
                        full = scorer.score_arrays(small)
                        scorer.allow_half(measured=False)
                        row["max_abs_half"] = max(abs(a - b) for a, b in zip(scorer.score_arrays(small), full, strict=True))
                        scorer.half = False
                except Exception as e:  # noqa: BLE001
                    row["error"] = f"{type(e).__name__}: {e}"[:300]
                emit(row)
            del scorer, pyiqa_model
            if cuda:
                torch.cuda.empty_cache()

        doc["projection"] = project(rows, names, sizes[0], args.images_total, gpus)
        text = table(doc)
        print(text)
        if out is not None:
            write_results(out, doc)
            out.with_suffix(".md").write_text(text)
        return 1 if any("error" in r for r in rows) else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
