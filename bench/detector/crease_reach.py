"""How far from a contour each crease component sees a line, and where the creases damage model draws its line.

    python -m bench.detector.crease_reach [--out FILE]

A disc of 140 levels on 60 (edge blurred 1 px, 384 px), with a thin line (Gaussian, 0.6 px) of 10, 20 or 30 levels
drawn at 1-8 px outside its edge: the bare score's `crease` (the mean profile across the contours, 9 points a pixel
apart) and edit_damage_rel's `crease_edges` (edge by edge) for each. Then the reach of the damage model's contour
mask (bench/detector/signatures.py: the top 8 % of the gradient), whose border its line is drawn 2-3 px beyond. No
fit, no draw: a geometry check of the component against the model it is validated on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import command_line, environment, results_path, write_results

RADIUS, INSIDE, OUTSIDE, SIDE = 100, 200.0, 60.0, 384
LEVELS = (10.0, 20.0, 30.0)
DISTANCES = tuple(range(1, 9))


def disc() -> tuple[np.ndarray, np.ndarray]:
    """(the disc's luma, each pixel's distance from its centre)."""
    from scipy.ndimage import gaussian_filter

    yy, xx = np.indices((SIDE, SIDE)).astype(np.float64)
    r = np.hypot(yy - SIDE / 2, xx - SIDE / 2)
    return gaussian_filter(np.where(r < RADIUS, INSIDE, OUTSIDE), 1.0), r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(results_path(__file__)))
    args = ap.parse_args(argv)
    import torch

    from banana100.metrics.detector import model
    from bench.detector import signatures as sg

    detector = model.EditDamage()
    base, r = disc()

    def creases(luma: np.ndarray) -> dict[str, float]:
        rgb = np.repeat(np.clip(luma + 0.5, 0, 255).astype(np.uint8)[..., None], 3, axis=2)
        with torch.inference_mode():
            detector(torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255)
        return {c: round(float(detector.last_components[c][0]), 4) for c in ("crease", "crease_edges")}

    rows = {"clean": creases(base)}
    print(f"clean disc: {rows['clean']}")
    for d in DISTANCES:
        line = np.exp(-((r - (RADIUS + d)) ** 2) / (2 * 0.6 ** 2))
        rows[f"{d} px"] = {f"{a:g} levels": creases(base + a * line) for a in LEVELS}
        print(f"line {d} px off the edge: " + "; ".join(f"{k} crease {v['crease']:.3f}, crease_edges "
                                                        f"{v['crease_edges']:.3f}" for k, v in rows[f"{d} px"].items()))
    mask = sg._contours(np.repeat(base[..., None], 3, axis=2))
    reach = float(r[mask].max() - RADIUS)
    print(f"the damage model's contour mask reaches {reach:.1f} px outside the edge: its line lies "
          f"{reach + 2:.1f}-{reach + 3:.1f} px off it")
    write_results(Path(args.out), {"command": command_line("bench.detector.crease_reach", argv or sys.argv[1:], {}),
                                   "environment": environment(), "disc": {"radius": RADIUS, "levels": [INSIDE, OUTSIDE],
                                                                          "edge_blur_px": 1.0, "side": SIDE},
                                   "components": rows, "model_mask_reach_px": round(reach, 2)})
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
