"""A second damage model for bench/detector/validate_edit_damage.py, unlike the simulated editor's.

Nothing in banana100/metrics/detector/model*.py was designed or tuned on it: it exists to
check the detector on damage it has not seen. Per chain it draws its own parameters (seeded);
per step it:

- shifts and crops the content by a few pixels and resamples it back to the size (bicubic), so
  no two steps are pixel-aligned (the simulated editor never moves content);
- adds a fixed periodic lattice of the chain's period (5-12 px; the simulated editor has none)
  at a random angle, so it accumulates step after step as a recursive editor's pattern would;
- adds grain correlated over 0.6-1.2 px (the simulated editor's is white), 0.8-1.6 levels;
- drifts the colour toward magenta or blue (the simulated editor's goes green), 0.2-0.5 % a step;
- at one step, pastes new content (a shaded disc: "add an apple");
- and never compresses (JPEG stays out of "damage" here, as in the ladders).
"""

from __future__ import annotations

import numpy as np
from PIL import Image
from scipy.ndimage import gaussian_filter

DRIFTS = {"magenta": np.array([1.0, -1.0, 0.8]), "blue": np.array([-0.6, -0.2, 1.0])}


def chain_params(seed: int) -> dict:
    rng = np.random.default_rng(1000 + seed)
    return {
        "period": float(rng.uniform(5, 12)),
        "angle": float(rng.uniform(0, np.pi)),
        "lattice": float(rng.uniform(0.25, 0.45)),  # levels added per step
        "grain": float(rng.uniform(0.8, 1.6)),
        "grain_length": float(rng.uniform(0.6, 1.2)),
        "drift": str(rng.choice(list(DRIFTS))),
        "drift_rate": float(rng.uniform(0.002, 0.005)),
        "paste_step": int(rng.integers(2, 9)),
        "seed": seed,
    }


def _lattice(h: int, w: int, p: dict) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    u = xx * np.cos(p["angle"]) + yy * np.sin(p["angle"])
    v = -xx * np.sin(p["angle"]) + yy * np.cos(p["angle"])
    return (np.cos(2 * np.pi * u / p["period"]) + np.cos(2 * np.pi * v / p["period"])) / 2


def step(image: np.ndarray, k: int, p: dict) -> np.ndarray:
    """Step k (1-based) of the chain with parameters `p`, from the previous image."""
    rng = np.random.default_rng(p["seed"] * 7919 + k)
    h, w = image.shape[:2]
    # shift and crop by a few pixels, resampled back: content moves, nothing lines up
    t, l, b, r = (int(v) for v in rng.integers(0, 4, 4))
    moved = Image.fromarray(image[t:h - b, l:w - r]).resize((w, h), Image.BICUBIC)
    x = np.asarray(moved, dtype=np.float64)
    if k == p["paste_step"]:  # new content: a shaded disc
        cy, cx, rad = rng.uniform(0.25, 0.75) * h, rng.uniform(0.25, 0.75) * w, rng.uniform(0.06, 0.12) * min(h, w)
        yy, xx = np.mgrid[0:h, 0:w]
        d = np.hypot(yy - cy, xx - cx) / rad
        disc = d < 1
        colour = rng.uniform(40, 220, 3)
        shade = (1 - 0.4 * d)[..., None]
        x = np.where(disc[..., None], colour * shade, x)
    x = x + p["lattice"] * _lattice(h, w, p)[..., None]
    g = gaussian_filter(rng.normal(size=(h, w)), p["grain_length"])
    x = x + (p["grain"] * g / (g.std() + 1e-12))[..., None]
    x = x * (1 + p["drift_rate"] * DRIFTS[p["drift"]])
    return np.clip(x + 0.5, 0, 255).astype(np.uint8)


def chain(source: np.ndarray, seed: int, steps: int, keep=(0, 1, 5, 10, 20)) -> dict[int, np.ndarray]:
    """{step: image} for the steps in `keep` of a chain of `steps` steps from `source`."""
    p = chain_params(seed)
    return kept_steps(source, lambda x, k: step(x, k, p), steps, keep)


def kept_steps(source: np.ndarray, one_step, steps: int, keep) -> dict[int, np.ndarray]:
    """{step: image} for the steps in `keep` (and 0, the source) of `one_step(image, k)` applied for k = 1 ..
    `steps`, each to the previous image: the chain loop of every damage model here."""
    out, x = {0: source}, source
    for k in range(1, steps + 1):
        x = one_step(x, k)
        if k in keep:
            out[k] = x
    return out
