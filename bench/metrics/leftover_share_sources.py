"""Flat shares from the metrics' own filtering (`repair.centred_share`) vs `repair.leftover_share`'s
separate pass.

    python -m bench.metrics.leftover_share_sources

A pixel is flagged when |y - local mean| <= `leftover_bound` (4x the rounding of any summation
order) under a 7x7 Gaussian window. PIQE (both modes), NIQE (both) and BRISQUE's official mode
filter the same window with the same borders themselves, so they pass their y - mean on
instead of filtering again. Near-flat windows (one pixel a grey level off) sit near the bound,
where another arithmetic can flip them. This reports, per image, metric and mode, both shares
and how many pixels apart they are at least. Images: the bench
chain and its flat frames at 512 px, the flat-patch and synthetic images of banana100/testing/flat_images.py,
exact ramps, tiny and 2K images, noise, a uniform image. Writes bench/results/metrics/leftover_share_sources.json.
"""

from __future__ import annotations

import argparse
import numpy as np
import torch

import sys
from pathlib import Path
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, RESULTS, write_results


def images() -> list[tuple[str, np.ndarray]]:
    from banana100.testing.images import chain_images, flat_chain_images
    from banana100.testing.flat_images import flat_images, large_patch_image, synthetic_images

    out = [(f"chain {k}", a) for k, a in enumerate(chain_images(4, 512))]
    out += [(f"flat chain {k}", a) for k, a in enumerate(flat_chain_images(4, 512))]
    out += flat_images() + synthetic_images()
    out.append(("large flat squares", large_patch_image([40, 153, 255], 320, 100)))
    ramp = np.tile(np.arange(256, dtype=np.uint8), (64, 1))
    out.append(("horizontal ramp", np.repeat(ramp[..., None], 3, axis=2)))
    out.append(("diagonal ramp", np.repeat(((np.add.outer(np.arange(200), np.arange(300)) // 2) % 256)
                                           .astype(np.uint8)[..., None], 3, axis=2)))
    rng = np.random.default_rng(0)
    out.append(("noise 2048x1536", rng.integers(0, 256, (1536, 2048, 3), dtype=np.uint8)))
    out.append(("noise 16x16", rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)))
    out.append(("uniform 128", np.full((128, 128, 3), 128, np.uint8)))
    chain = chain_images(1, 2048)[0]
    out.append(("chain 2048", chain))
    return out


def luminance_and_padding(metric: str, model, x: torch.Tensor) -> tuple[torch.Tensor, str]:
    """The luminance map (B, H, W) whose flat share `metric` reports, and its padding."""
    if metric == "piqe":
        gray = model._pyiqa_gray(x) if model.mode == "pyiqa" else model._matlab_gray(x)
        return gray[:, 0], "replicate"
    y = model.luminance(x)
    if metric == "niqe":
        from banana100.metrics.native.niqe import BLOCK

        h, w = y.shape[-2:]
        return y[..., : h // BLOCK * BLOCK, : w // BLOCK * BLOCK].squeeze(-3), "replicate"
    return y, "zeros"


def main(argv=None) -> None:
    # no options: a parser all the same, so that --help says what it does instead of running it
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    from banana100.metrics.engine.scorer import to_tensor
    from banana100.metrics.native import build, repair

    params = PARAMS
    files = {"piqe": (), "niqe": ("niqe_modelparameters.mat",), "brisque": ("brisque_live_allmodel", "brisque_live_allrange")}
    # the metric/mode pairs whose share now comes from the metric's own filtering
    pairs = [("piqe", "pyiqa"), ("piqe", "official"), ("niqe", "pyiqa"), ("niqe", "official"), ("brisque", "official")]
    models = {}
    for metric, mode in pairs:
        if all((params / f).is_file() for f in files[metric]):
            models[metric, mode] = build(metric, {f: params / f for f in files[metric]}, mode)
        else:
            print(f"{metric}: parameter files not in {params}, skipped")
    rows, worst = [], 0.0
    for name, rgb in images():
        x = to_tensor(rgb)[None]
        for (metric, mode), model in models.items():
            if min(rgb.shape[:2]) < 96 and metric == "niqe":
                continue  # below NIQE's one block
            with torch.no_grad():
                model(x)
            own = float(model.last_flat_share[0])
            y, padding = luminance_and_padding(metric, model, x)
            separate = float(repair.leftover_share(y, padding=padding)[0])
            pixels = y.shape[-2] * y.shape[-1]
            rows.append({"image": name, "metric": metric, "mode": mode, "pixels": pixels,
                         "share_own_filtering": own, "share_separate_pass": separate,
                         "pixels_differ_at_least": round(abs(own - separate) * pixels)})
            worst = max(worst, abs(own - separate))
            print(f"{name:32s} {metric:8s} {mode:8s} share {own:.6f} vs {separate:.6f}  "
                  f"({rows[-1]['pixels_differ_at_least']} pixels)")
    out = RESULTS / "metrics" / "leftover_share_sources.json"
    write_results(out, {"rows": rows})
    equal = sum(r["share_own_filtering"] == r["share_separate_pass"] for r in rows)
    print(f"{len(rows)} image/metric/mode rows: {equal} equal, largest difference {worst:.2e}; written {out}")


if __name__ == "__main__":
    main()
