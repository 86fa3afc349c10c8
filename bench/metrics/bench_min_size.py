"""Smallest meaningful input size of each metric: where a score stops depending on the crop window.

    BANANA100_WEIGHTS=../shared/iqa-params python -m bench.metrics.bench_min_size [--metrics piqe,niqe,brisque,ilniqe]

Criterion (the same for every metric): a score is meaningful at side s when the metric ranks
s x s crops of natural images the same way after each crop is moved by 2 pixels (right and
down: practically the same content, another window). For each side s, crops are taken at fixed
random positions of five images bundled with scikit-image (astronaut, coffee, chelsea, rocket,
camera), each scored as it is and moved by 2 px, and

    rho(s) = Spearman's rank correlation between the two scores over the crops

The smallest meaningful side is the smallest s such that at s and at every larger side
measured, rho >= 0.8 and no crop scores NaN/inf or raises. Below it the score of a small image
depends on where the window falls (boundary effects, block grids, too few samples for the
fits) about as much as on what the image shows. Also reported: the median 2-px change of the
score as a share of the spread (p90 - p10) of the scores of 256 x 256 crops.

The metric is called on the model directly (`MetricScorer._forward`), not through the engine,
so sizes below the table's minimum are measured too. Metrics whose parameter files are absent
are skipped with the reason; a deep metric is measured when its real weights are present (its
size handling does not depend on the weights, but meaningfulness does). Writes
bench/results/metrics/min_size.json and prints the table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

import sys
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, write_results

from banana100.metrics.engine.scorer import MetricScorer, to_tensor
from banana100.errors import Banana100Error
from banana100.metrics.table import get_metric

SIDES = (5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 104, 112, 128, 160, 192, 256)
SHIFT = 2
THRESHOLD = 0.8  # Spearman rho, crop vs crop moved by SHIFT px
REFERENCE_SIDE = 256


def images() -> dict[str, np.ndarray]:
    import skimage.data as d

    out = {}
    for name in ("astronaut", "coffee", "chelsea", "rocket", "camera"):
        a = getattr(d, name)()
        out[name] = np.ascontiguousarray(np.repeat(a[:, :, None], 3, axis=2) if a.ndim == 2 else a[:, :, :3])
    return out


def crops(imgs: dict[str, np.ndarray], side: int, per_image: int, seed: int = 0):
    """[(name, crop, crop moved by SHIFT px)]: the same positions for every metric."""
    rng = np.random.default_rng(seed + side)
    out = []
    for name, a in imgs.items():
        h, w = a.shape[:2]
        for _ in range(per_image):
            y, x = int(rng.integers(0, h - side - SHIFT)), int(rng.integers(0, w - side - SHIFT))
            out.append((name, a[y:y + side, x:x + side], a[y + SHIFT:y + SHIFT + side, x + SHIFT:x + SHIFT + side]))
    return out


def score_all(scorer: MetricScorer, arrays: list[np.ndarray]) -> list[float]:
    """Scores straight from the model (no size check); an exception or non-finite result is NaN."""
    out = []
    step = scorer.batch_size if scorer.batchable else 1
    for k in range(0, len(arrays), step):
        x = torch.stack([to_tensor(a) for a in arrays[k:k + step]])
        try:
            out += scorer._forward(x)
        except Exception:  # noqa: BLE001 - recorded as a failed score
            out += [float("nan")] * x.shape[0]
    return [v if math.isfinite(v) else float("nan") for v in out]


def measure(metric: str, imgs, per_image: int, sides, batch_size: int = 16, reference: bool = True,
            all_sides: bool = True) -> dict:
    scorer = MetricScorer(metric, device="cpu", batch_size=batch_size)
    spec = get_metric(metric)
    spread = float("nan")  # only for the secondary ratio column; --no-reference skips it (IL-NIQE: slow)
    if reference:
        ref_scores = np.array(score_all(scorer, [c for _, c, _ in crops(imgs, REFERENCE_SIDE, per_image)]))
        spread = float(np.nanpercentile(ref_scores, 90) - np.nanpercentile(ref_scores, 10))
    rows = []
    for side in sorted(sides, reverse=True):  # from the largest: below the first failing side nothing counts
        cs = crops(imgs, side, per_image)
        a = np.array(score_all(scorer, [c for _, c, _ in cs]))
        b = np.array(score_all(scorer, [m for _, _, m in cs]))
        bad = int(np.sum(~np.isfinite(a)) + np.sum(~np.isfinite(b)))
        ok = np.isfinite(a) & np.isfinite(b)
        jitter = float(np.median(np.abs(a[ok] - b[ok]))) if ok.any() else float("nan")
        rho = float(spearmanr(a[ok], b[ok]).statistic) if ok.sum() >= 5 else float("nan")
        rows.append({"side": side, "crops": len(cs), "failed": bad, "rho": rho, "jitter": jitter,
                     "ratio": jitter / spread if spread > 0 else float("nan"),
                     "median_score": float(np.nanmedian(a)) if ok.any() else float("nan"),
                     "scores": [[float(u), float(v)] for u, v in zip(a, b, strict=True)]})
        print(f"  {metric} {side:4d}px  failed {bad:3d}/{2 * len(cs)}  rho {rho:6.3f}  jitter {jitter:10.4g}  "
              f"ratio {rows[-1]['ratio']:7.3f}  median {rows[-1]['median_score']:9.4g}", flush=True)
        if not all_sides and (bad or not rho >= THRESHOLD):
            break
    rows.sort(key=lambda row: row["side"])
    smallest = None
    for row in reversed(rows):  # walk down from the largest side while the criterion holds
        if row["failed"] or not (row["rho"] >= THRESHOLD):
            break
        smallest = row["side"]
    return {"metric": metric, "backend": scorer.backend, "spread_256": spread,
            "table_min_size": spec.min_size, "smallest_meaningful": smallest, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metrics", default="piqe,niqe,brisque,ilniqe,nrqm,pi")
    ap.add_argument("--per-image", type=int, default=6, help="crop positions per image and side")
    ap.add_argument("--sides", default=",".join(map(str, SIDES)))
    ap.add_argument("--batch-size", type=int, default=16, help="same-size crops per forward pass (IL-NIQE: 1)")
    ap.add_argument("--no-reference", action="store_true", help="skip the 256 px crops (the ratio column)")
    ap.add_argument("--first-failure", dest="all_sides", action="store_false",
                    help="measure from the largest side down and stop at the first side that fails (IL-NIQE: slow)")
    ap.add_argument("--out", default=str(RESULTS / "metrics" / "min_size.json"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    imgs = images()
    sides = [int(s) for s in args.sides.split(",")]
    out_path = Path(args.out)
    results = json.loads(out_path.read_text()) if out_path.is_file() else {}
    results.setdefault("metrics", {})
    results.update(criterion=f"Spearman rho between scores of crops and of the crops moved {SHIFT} px >= "
                             f"{THRESHOLD}, and no failed score, at this side and every larger side measured",
                   images="skimage: astronaut, coffee, chelsea, rocket, camera",
                   machine=f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    for metric in args.metrics.split(","):
        try:
            r = measure(metric, imgs, args.per_image, sides, args.batch_size, not args.no_reference, args.all_sides)
        except Banana100Error as e:
            print(f"{metric}: skipped ({e})", flush=True)
            continue
        r.update(per_image=args.per_image, crops_per_side=len(crops(imgs, sides[-1], args.per_image)))
        results["metrics"][metric] = r
        write_results(out_path, results)
        print(f"{metric}: smallest meaningful side {r['smallest_meaningful']} (table: {r['table_min_size']}); "
              f"spread of 256px scores {r['spread_256']:.4g}", flush=True)
    print("\n| metric | smallest meaningful side | rho there | one side below | table min_size | 2-px change / spread at that side |")
    print("| --- | ---: | ---: | --- | ---: | ---: |")
    for metric, r in results["metrics"].items():
        rows = {row["side"]: row for row in r["rows"]}
        s = r["smallest_meaningful"]
        if s is None:
            print(f"| {metric} | none measured | - | - | {r['table_min_size']} | - |")
            continue
        below = [row for row in r["rows"] if row["side"] < s]
        b = "-"
        if below:
            row = below[-1]
            b = f"{row['side']} px: " + (f"{row['failed']} of {2 * row['crops']} failed" if row["failed"] else f"rho {row['rho']:.3f}")
        print(f"| {metric} | {s} | {rows[s]['rho']:.3f} | {b} | {r['table_min_size']} | {rows[s]['ratio']:.3f} |")

if __name__ == "__main__":
    main()
