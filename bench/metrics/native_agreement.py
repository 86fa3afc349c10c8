"""Agreement of the native hand-crafted metrics with pyiqa and with the original releases.

    python -m bench.metrics.native_agreement [--metrics piqe,niqe,brisque,ilniqe] [--params ../shared/iqa-params]

For every native metric whose parameter files are at hand:

- mode "pyiqa": native score vs pyiqa 0.1.16's score (backend "pyiqa") on every image of
  `../shared/reference-images`, on images of a simulated-editor chain, on odd-size crops, on
  grayscale images, on images with flat areas (banana100/testing/flat_images.py) and on crops at the
  metric's minimum size;
- mode "official": native score vs the published values of the original releases (the csv files
  beside the reference images), next to pyiqa's deviation from them.

Writes `banana100/metrics/native/agreement.json` (the metric cards quote it: `python -m banana100.metrics.hub.cards`),
keeping the entries of metrics not run this time, and prints the tables for BENCHMARKS.md. NRQM and PI need `NRQM_model.mat`; without it they are
skipped with the reason.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, REPO, SHARED, write_results

OUT = REPO / "banana100" / "metrics" / "native" / "agreement.json"


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def published_values(ref: Path) -> dict[str, list[dict]]:
    """metric -> [{image, source, value}] from the csv files beside the reference images."""
    out: dict[str, list[dict]] = {}
    tid = {row["metric"]: row for row in read_csv(ref / "tid2013" / "official_scores.csv")}
    sources = {"piqe": "MATLAB piqe", "niqe": "LIVE MATLAB release", "brisque": "LIVE MATLAB release",
               "ilniqe": "official MATLAB release", "nrqm": "original MATLAB release", "pi": "PIRM MATLAB code"}
    for metric, source in sources.items():
        for image in ("I03.bmp", "I04.bmp"):
            out.setdefault(metric, []).append(
                {"image": f"tid2013/{image}", "source": source, "value": float(tid[metric][image])})
    for row in read_csv(ref / "piq" / "reference_values.csv"):
        if row["metric"] == "brisque":
            out["brisque"].append({"image": f"piq/{row['image']}", "source": "MATLAB (piq's tests)",
                                   "value": float(row["reference_value"])})
    for row in read_csv(ref / "ilniqe" / "official_scores.csv"):
        out["ilniqe"].append({"image": f"ilniqe/{row['image']}", "source": "official MATLAB release",
                              "value": float(row["ilniqe_official_mat_matlab"])})
    return out


def agreement_images(ref: Path, min_size: int) -> list[tuple[str, np.ndarray]]:
    """(name, HxWx3 uint8) images for the pyiqa-mode comparison."""
    from banana100.chains.editors.simulated import SimulatedEditor
    from banana100.imageio import load_rgb

    images = [(str(p.relative_to(ref)), load_rgb(p)) for p in sorted(ref.rglob("*"))
              if p.suffix.lower() in (".png", ".bmp", ".gif")]
    import skimage.data

    coffee = load_rgb(Path(skimage.data.data_dir) / "coffee.png")
    editor, x = SimulatedEditor(), coffee
    for step in range(1, 11):
        x = editor.apply(x, seed=step)
        if step in (1, 5, 10):
            images.append((f"simulated chain (coffee) step {step}", x))
    images.append(("odd size 97x131 crop", coffee[50:181, 100:197]))
    images.append(("odd size 255x257 crop", coffee[10:267, 20:275]))
    gray = np.repeat(load_rgb(ref / "tid2013" / "I04.bmp").mean(axis=2, keepdims=True).round().astype(np.uint8), 3, 2)
    images.append(("grayscale I04 (3 equal channels)", gray))
    # flat areas (issue 12): every grey level as flat patches, a binary shape, clipped photos
    from banana100.testing.flat_images import flat_patch_image, synthetic_images

    images.append(("flat patches at every grey level (colour, 224x240)", flat_patch_image(224, 240, colour=True)))
    images += [(f"{n} (skimage)", rgb) for n, rgb in synthetic_images()
               if n in ("horse", "camera stretched x2, clipped", "camera, sky clipped at 200")]
    images.append((f"minimum size {min_size}x{min_size} crop", coffee[100:100 + min_size, 200:200 + min_size]))
    images.append((f"near minimum {min_size + 3}x{min_size + 1} crop", coffee[:min_size + 1, :min_size + 3]))
    return images


def rel(a: float, b: float) -> float:
    """|a - b| / |b|, with |b| floored at 1 (BRISQUE crosses zero)."""
    return abs(a - b) / max(abs(b), 1.0)


def run(metric: str, ref: Path) -> dict:
    from banana100.metrics import weights
    from banana100.metrics.engine.scorer import MetricScorer
    from banana100.imageio import load_rgb
    from banana100.metrics.table import get_metric

    spec = get_metric(metric)
    missing = sorted(set(weights.missing(metric, "native")) | set(weights.missing(metric, "pyiqa")))
    if missing:
        return {"skipped": f"missing {', '.join(missing)}"}
    scorers = {key: MetricScorer(metric, device="cpu", batch_size=1, backend=b, mode=m)
               for key, (b, m) in {"pyiqa": ("pyiqa", "pyiqa"), "native": ("native", "pyiqa"),
                                   "official": ("native", "official")}.items()}
    rows = []
    for name, rgb in agreement_images(ref, spec.min_size):
        s = {k: sc.score_arrays([rgb])[0] for k, sc in scorers.items()}
        rows.append({"image": name, "size": f"{rgb.shape[1]}x{rgb.shape[0]}", **s,
                     "rel_diff": rel(s["native"], s["pyiqa"])})
        print(f"  {metric:8s} {name:40s} pyiqa {s['pyiqa']:10.4f} native {s['native']:10.4f} "
              f"official {s['official']:10.4f}", file=sys.stderr, flush=True)
    worst = max(rows, key=lambda r: r["rel_diff"])
    published = []
    for p in published_values(ref).get(metric, []):
        rgb = load_rgb(ref / p["image"])
        official = scorers["official"].score_arrays([rgb])[0]
        pyiqa = scorers["pyiqa"].score_arrays([rgb])[0]
        published.append({**p, "official": official, "pyiqa": pyiqa,
                          "official_dev": (official - p["value"]) / abs(p["value"]),
                          "pyiqa_dev": (pyiqa - p["value"]) / abs(p["value"]),
                          "official_abs": official - p["value"]})
    return {"pyiqa_mode": {"images": len(rows), "max_rel_diff": worst["rel_diff"], "worst_image": worst["image"],
                           "rows": rows},
            "official_mode": published}


def markdown(results: dict) -> str:
    lines, command = [], None
    for metric, r in results["metrics"].items():
        if r.get("command") != command:
            command = r.get("command")
            lines.append(f"\n`{command}`")
        if "skipped" in r:
            lines.append(f"- {metric}: skipped ({r['skipped']})")
            continue
        pm = r["pyiqa_mode"]
        lines.append(f"\n**{metric}**, mode pyiqa: max relative difference from pyiqa {pm['max_rel_diff']:.1e} "
                     f"over {pm['images']} images (worst: {pm['worst_image']}).\n")
        lines.append("| image | published (source) | official mode | deviation | pyiqa | deviation |")
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for p in r["official_mode"]:
            lines.append(f"| {p['image']} | {p['value']:.4f} ({p['source']}) | {p['official']:.4f} | "
                         f"{100 * p['official_dev']:+.3f} % | {p['pyiqa']:.4f} | {100 * p['pyiqa_dev']:+.2f} % |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", default="piqe,niqe,brisque,ilniqe,nrqm,pi")
    ap.add_argument("--params", type=Path, default=PARAMS)
    ap.add_argument("--ref", type=Path, default=SHARED / "reference-images")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    os.environ.setdefault("BANANA100_WEIGHTS", str(args.params))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    import pyiqa

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    t0 = time.time()
    # metrics not run this time keep their earlier results (one file for all the cards)
    earlier = json.loads(args.out.read_text()).get("metrics", {}) if args.out.is_file() else {}
    metrics = {m: run(m, args.ref) for m in args.metrics.split(",")}
    for m in metrics.values():
        m["command"] = "python -m bench.metrics.native_agreement " + " ".join(sys.argv[1:])
        m["seconds"] = round(time.time() - t0)
    results = {
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "pyiqa": pyiqa.__version__, "machine": platform.machine()},
        "metrics": {**earlier, **metrics},
    }
    write_results(args.out, results)
    print(markdown(results))
    print(f"\nwritten {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
