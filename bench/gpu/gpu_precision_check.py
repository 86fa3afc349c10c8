"""Scores on CUDA against the CPU's, per metric and precision, with the user's TF32 flags on.

    python -m bench.gpu.gpu_precision_check [--device cuda] [--metrics piqe,niqe,...] [--side 512] [--n 3]
                                        [--out results.json] [--card-data banana100/metrics/precision_fast.json]

For every native metric (and the deep ones given with --deep, random weights from
banana100/testing/untrained.py, the same arch on both devices) the same images are scored:
- on the CPU (the reference: exact everywhere);
- on `--device` with precision "exact", once with torch's global TF32 flags on (as a user may
  have them: the guard must hold them off) and once with them off;
- on `--device` with precision "fast" (TF32; deep metrics also bfloat16 autocast).
Each row gives the largest relative difference max |a - b| / max(|b|, 1e-12):
`exact_vs_cpu_tf32_on`, `exact_vs_cpu_tf32_off`, `fast_vs_exact_max_rel`, `fast_vs_cpu`.
Prints one JSON line per metric and writes all of them to --out. `--card-data` writes the
`fast_vs_exact_max_rel` of each metric where the cards read it (precision_fast.json).
Runs on CPU too (`--device cpu`: every difference 0), which the tests use as a smoke run.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import sys
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, environment, scratch_dir, write_results

NATIVE = ("piqe", "niqe", "brisque", "ilniqe", "nrqm", "pi", "edit_damage")


def rel(a: list, b: list) -> float | None:
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    if not pairs:
        return None
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in pairs)


def scores(scorer, images) -> list:
    from banana100.errors import Banana100Error

    try:
        return scorer.score_arrays(images)
    except Banana100Error as e:  # an image without a score: compare the others
        if getattr(e, "scores", None) is None:
            raise
        return e.scores


def set_global_tf32(on: bool) -> None:
    """What a user does to speed up float32 on an Ampere-or-later GPU (the old API; torch 2.9+ maps it)."""
    import torch

    torch.backends.cudnn.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--metrics", default=",".join(NATIVE))
    ap.add_argument("--deep", default="", help="deep metrics with random weights, e.g. cnniqa,dbcnn,maniqa")
    ap.add_argument("--side", type=int, default=512)
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--card-data", default=None, help="write the fast rows here (banana100/metrics/precision_fast.json)")
    args = ap.parse_args()

    import torch

    from banana100.metrics import weights
    from banana100.metrics.engine.scorer import MetricScorer
    from banana100.testing.images import chain_images

    os.environ.setdefault("BANANA100_WEIGHTS", str(PARAMS))
    device = torch.device(args.device)
    images = chain_images(args.n, args.side)
    tmp = scratch_dir("gpu-precision-")
    rows = []
    names = [m for m in args.metrics.split(",") if m] + [m for m in args.deep.split(",") if m]
    for name in names:
        t0 = time.perf_counter()
        try:
            if name in NATIVE:
                if weights.missing(name):
                    raise FileNotFoundError(f"parameter files missing: {weights.missing(name)}")

                def make(dev, precision, name=name):
                    return MetricScorer(name, device=dev, precision=precision)
            else:
                from banana100.testing.untrained import build_untrained

                torch.manual_seed(0)
                model = build_untrained(name, tmp, device="cpu")
                state = {k: v.clone() for k, v in model.state_dict().items()}

                def make(dev, precision, name=name, model=model, state=state):
                    model.load_state_dict(state)
                    return MetricScorer.from_model(name, model, device=dev, precision=precision)
            cpu = scores(make("cpu", "exact"), images)
            set_global_tf32(True)
            exact_on = scores(make(device, "exact"), images)
            fast = scores(make(device, "fast"), images)
            set_global_tf32(False)
            exact_off = scores(make(device, "exact"), images)
            row = {"metric": name, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                   "images": args.n, "side": args.side,
                   "exact_vs_cpu_tf32_on": rel(exact_on, cpu), "exact_vs_cpu_tf32_off": rel(exact_off, cpu),
                   "fast_vs_exact_max_rel": rel(fast, exact_on), "fast_vs_cpu": rel(fast, cpu),
                   "seconds": round(time.perf_counter() - t0, 1)}
        except Exception as e:  # noqa: BLE001 - one metric's failure is a row, the others go on
            row = {"metric": name, "error": f"{type(e).__name__}: {e}"[:300]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"command": "python -m bench.gpu.gpu_precision_check", "environment": environment(), "rows": rows}
    if args.out:
        write_results(Path(args.out), result)
    if args.card_data:
        data = json.loads(Path(args.card_data).read_text()) if Path(args.card_data).is_file() else {}
        data.setdefault("metrics", {}).update({r["metric"]: {k: r[k] for k in ("device", "fast_vs_exact_max_rel",
                                                                               "exact_vs_cpu_tf32_on")}
                                               for r in rows if "error" not in r})
        write_results(Path(args.card_data), data)


if __name__ == "__main__":
    main()
