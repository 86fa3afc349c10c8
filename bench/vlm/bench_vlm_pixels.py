"""What `max_pixels` costs and keeps for VisualQuality-R1 (Qwen2.5-VL's image processor, CPU, no model).

For square images of 512 to 4096 px and three limits (transformers' processor default
1,003,520; banana100's default 4,194,304 = 2048^2; the official code's 12,845,056 through
qwen_vl_utils) it measures, side by side in one run:

- visual tokens per image (what the 7B model's prefill pays for),
- the processor's preprocessing time per image (best of --repeats, CPU),
- how much of a static noise the model still sees: the standard deviation of (noisy - clean)
  after the processor's resize, as a share of the noise added (1.0: all of it; Banana100's
  damage is this kind of pixel-level noise, which a downscale averages away).

    python -m bench.vlm.bench_vlm_pixels --out bench/results/vlm/vlm_pixels.json
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, best_time, write_results

LIMITS = {"transformers default": 1_003_520, "banana100 default": 2048 * 2048, "official (qwen_vl_utils)": 12_845_056}


def clean_image(side: int) -> np.ndarray:
    """A smooth colour image (gradients and a soft disc): little high-frequency content of its own."""
    y, x = np.mgrid[0:side, 0:side] / side
    disc = np.exp(-((x - 0.5) ** 2 + (y - 0.5) ** 2) / 0.05)
    rgb = np.stack([60 + 120 * x, 80 + 100 * y, 90 + 120 * disc], axis=-1)
    return rgb.astype(np.uint8)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sides", default="512,1024,2048,4096")
    ap.add_argument("--sigma", type=float, default=8.0, help="noise added (grey levels)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS / "vlm" / "vlm_pixels.json")
    args = ap.parse_args(argv)

    import torch
    from transformers import Qwen2VLImageProcessor

    from banana100.metrics.vlm.scorer import MIN_PIXELS, visual_tokens

    torch.set_num_threads(2)
    processor = Qwen2VLImageProcessor()
    std = float(np.mean(processor.image_std))
    rng = np.random.default_rng(0)
    rows = []
    for side in [int(s) for s in args.sides.split(",")]:
        clean = clean_image(side)
        noise = rng.normal(0, args.sigma, clean.shape)
        noisy = np.clip(clean + noise, 0, 255).astype(np.uint8)
        added = float((noisy.astype(np.float64) - clean).std())
        for label, limit in LIMITS.items():
            def run(img=noisy, limit=limit):
                return processor(images=[img], min_pixels=MIN_PIXELS, max_pixels=limit,
                                 return_tensors="pt")["pixel_values"]

            seconds, pv_noisy = best_time(run, args.repeats)
            pv_clean = run(clean)
            kept = float((pv_noisy - pv_clean).double().std()) * std * 255 / added
            tokens = visual_tokens(side, side, max_pixels=limit)
            rows.append({"side": side, "limit": label, "max_pixels": limit, "visual_tokens": tokens,
                         "preprocess_s": round(seconds, 4), "noise_kept": round(kept, 3)})
            print(f"{side:5d}px  {label:26s} tokens {tokens:6d}  preprocess {seconds * 1000:7.1f} ms  "
                  f"noise kept {kept:.2f}", flush=True)
    result = {"what": __doc__.splitlines()[0], "sigma": args.sigma, "repeats": args.repeats,
              "machine": f"{platform.machine()}, torch threads 2", "when": time.strftime("%Y-%m-%d %H:%M"),
              "rows": rows}
    write_results(args.out, result)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
