"""Damage models of the editors' signatures other than Nano Banana Pro's, for bench/detector/validate_edit_damage.py.

Each is written from the signature's description (the paper's, as docs/edit-damage.md's components table quotes them), with its strengths drawn
per chain from stated ranges (seeded), and tuned on no image: it exists to check the detector on damage of
each kind. Every step first re-renders the image as an editor does (`rerender`: a shift and crop of 0-2 px,
resampled back, so no two steps are pixel-aligned), then adds the signature, so that it accumulates step
after step:

- `creases` (Nano Banana 2 Fast, "creases along object contours"): a thin line of 1-3 levels a step,
  lighter or darker, 2-3 px off the strongest contours, along them, and a halo (unsharp masking, 5-15 % a
  step) in a band of 4 px on either side of them;
- `speckles` (FLUX.2, "speckles"): 100-300 new specks a megapixel a step, each a dot of radius 0.5-1.2 px,
  30-90 levels lighter or darker than the pixel it lands on, some coloured;
- `simplified` (Qwen-Image-Edit, "textures simplified, fine detail flattened"): edge-preserving smoothing,
  each pixel pulled 30-60 % of the way towards its sigma 1-1.5 px blur, less where its gradient is an edge's
  (weight exp(-(g / 12 levels)^2)); objects duplicated are out of scope: they change the content, not its
  quality;
- `jpeg` (a chain saved step by step as JPEG): the re-rendered image saved at the chain's quality, 30-75.

Every length above is at `scale` 1 (the default). `scale` s draws the damage s times coarser, as an editor that
works at a coarser scale than the image's pixels would make it: the crease's offset, band and halo blur, the
specks' radius, the smoothing's sigma, and the contours found at s times the blur, and s^2 fewer specks (the
same count for the image's area in specks of s times the size). The re-render's shift and JPEG's 8 px blocks
do not scale.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image
from scipy.ndimage import distance_transform_edt, gaussian_filter, sobel

from bench.detector.damage_model_b import kept_steps

SIGNATURES = ("creases", "speckles", "simplified", "jpeg")
# which editor's signature each model stands for (the card's words)
EDITORS = {"creases": "Nano Banana 2 Fast", "speckles": "FLUX.2 [dev]", "simplified": "Qwen-Image-Edit",
           "jpeg": "a chain saved as JPEG"}


def chain_params(signature: str, seed: int, scale: float = 1.0) -> dict:
    """The chain's strengths, drawn from the stated ranges (module docstring), its damage `scale` times coarser."""
    if not scale > 0:
        raise ValueError(f"scale must be above 0, not {scale!r}")
    rng = np.random.default_rng(2000 + seed)
    p = {"signature": signature, "seed": seed, "scale": float(scale)}
    if signature == "creases":
        p.update(line=float(rng.uniform(1.0, 3.0)), offset=int(rng.integers(2, 4)), polarity=float(rng.choice([-1, 1])),
                 halo=float(rng.uniform(0.05, 0.15)))
    elif signature == "speckles":
        p.update(density=float(rng.uniform(100, 300)), contrast=(30.0, 90.0), coloured=float(rng.uniform(0.2, 0.6)))
    elif signature == "simplified":
        p.update(pull=float(rng.uniform(0.3, 0.6)), sigma=float(rng.uniform(1.0, 1.5)), edge=12.0)
    elif signature == "jpeg":
        p.update(quality=int(rng.integers(30, 76)))
    else:
        raise ValueError(f"unknown signature {signature!r}; choose one of {', '.join(SIGNATURES)}")
    return p


def rerender(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A shift and crop of 0-2 px a side, resampled back to the size (bicubic): an editor's re-render."""
    h, w = image.shape[:2]
    t, l, b, r = (int(v) for v in rng.integers(0, 3, 4))
    return np.asarray(Image.fromarray(image[t:h - b, l:w - r]).resize((w, h), Image.BICUBIC))


def _luma(x: np.ndarray) -> np.ndarray:
    return x[..., 0] * 0.299 + x[..., 1] * 0.587 + x[..., 2] * 0.114


def _contours(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """The strongest contours: gradient magnitude (sigma 1.5 px x scale) in its top 8 %, at least 4 levels a
    pixel (over scale: the same contrast over a wider edge)."""
    s = gaussian_filter(_luma(x), 1.5 * scale)
    g = np.hypot(sobel(s, 0), sobel(s, 1)) / 8
    return g >= max(4.0 / scale, float(np.quantile(g, 0.92)))


def _creases(x: np.ndarray, p: dict, rng) -> np.ndarray:
    s = p["scale"]
    dist = distance_transform_edt(~_contours(x, s))
    offset = p["offset"] * s
    line = gaussian_filter(((dist > offset - 0.5 * s) & (dist <= offset + 0.5 * s)).astype(np.float64), 0.6 * s)
    line /= max(line.max(), 1e-9)
    band = (dist <= 4 * s).astype(np.float64)
    blurred = np.stack([gaussian_filter(x[..., c], 2.0 * s) for c in range(3)], -1)
    x = x + p["halo"] * (x - blurred) * band[..., None]
    return x + (p["polarity"] * p["line"] * line)[..., None]


def _speckles(x: np.ndarray, p: dict, rng) -> np.ndarray:
    h, w = x.shape[:2]
    s = p["scale"]
    n = rng.poisson(p["density"] * h * w / 1e6 / s ** 2)
    field = np.zeros((h, w, 3))
    yy, xx = rng.uniform(0, h, n), rng.uniform(0, w, n)
    reach = 3 * s  # the dot's window: 2.5 radii of the largest
    for y, xc in zip(yy, xx, strict=True):
        radius = rng.uniform(0.5, 1.2) * s
        amp = rng.uniform(*p["contrast"]) * rng.choice([-1, 1])
        colour = rng.uniform(0.3, 1.0, 3) if rng.random() < p["coloured"] else np.ones(3)
        y0, y1 = int(max(0, y - reach)), int(min(h, y + reach + 1))
        x0, x1 = int(max(0, xc - reach)), int(min(w, xc + reach + 1))
        gy, gx = np.mgrid[y0:y1, x0:x1]
        dot = np.exp(-((gy + 0.5 - y) ** 2 + (gx + 0.5 - xc) ** 2) / (2 * radius ** 2))
        field[y0:y1, x0:x1] += amp * dot[..., None] * colour
    return x + field


def _simplified(x: np.ndarray, p: dict, rng) -> np.ndarray:
    scale = p["scale"]
    blurred = np.stack([gaussian_filter(x[..., c], p["sigma"] * scale) for c in range(3)], -1)
    s = _luma(blurred)
    g = np.hypot(sobel(s, 0), sobel(s, 1)) / 8 * scale  # levels over the smoothing's scale
    keep = np.exp(-(g / p["edge"]) ** 2)  # 1 on texture and flat areas, towards 0 on edges
    return x + p["pull"] * keep[..., None] * (blurred - x)


def _jpeg(x: np.ndarray, p: dict, rng) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(np.clip(x + 0.5, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=p["quality"])
    return np.asarray(Image.open(buf).convert("RGB"), dtype=np.float64)


_STEP = {"creases": _creases, "speckles": _speckles, "simplified": _simplified, "jpeg": _jpeg}


def step(image: np.ndarray, k: int, p: dict) -> np.ndarray:
    """Step k (1-based) of the chain with parameters `p`, from the previous image."""
    rng = np.random.default_rng(p["seed"] * 7919 + k)
    x = rerender(image, rng).astype(np.float64)
    x = _STEP[p["signature"]](x, p, rng)
    return np.clip(x + 0.5, 0, 255).astype(np.uint8)


def chain(source: np.ndarray, signature: str, seed: int, steps: int, keep=(0, 1, 5, 10, 20),
          scale: float = 1.0) -> dict[int, np.ndarray]:
    """{step: image} for the steps in `keep` of a chain of `steps` steps of `signature` from `source`, its
    damage `scale` times coarser."""
    p = chain_params(signature, seed, scale)
    return kept_steps(source, lambda x, k: step(x, k, p), steps, keep)


def _rerendered(image: np.ndarray, k: int, p: dict) -> np.ndarray:
    """Step k of the chain's twin: the same re-render (the same crops and shifts), no signature."""
    x = rerender(image, np.random.default_rng(p["seed"] * 7919 + k)).astype(np.float64)
    return np.clip(x + 0.5, 0, 255).astype(np.uint8)


def damage_growth(images: dict[int, np.ndarray], signature: str, seed: int, steps: int) -> dict[int, float]:
    """The chain's own damage, detector-free: each kept step's RMS difference (8-bit levels, RGB) from its twin,
    the same chain re-rendered alone (the same crops and shifts, no signature), which it stays aligned with. A
    chain whose RMS does not grow after step 1 adds no damage after it (a smooth render re-saved at one JPEG
    quality reaches JPEG's fixed point with the first save): the protocol's premise, more steps more damage,
    does not hold for it."""
    p = chain_params(signature, seed)
    twin = kept_steps(images[0], lambda x, k: _rerendered(x, k, p), steps, tuple(images))
    return {k: float(np.sqrt(np.mean((images[k].astype(np.float64) - twin[k]) ** 2))) for k in images if k >= 1}


GROWTH = 0.1  # a tenth: the share a statistic moves on the same content (edit_damage_rel's TOLERANCE)


def damage_grows(growth: dict[int, float], check_steps=(5, 10, 20)) -> bool:
    """Whether a chain's own damage (`damage_growth`) is above step 1's by more than GROWTH at every checked step
    it kept: the protocol's premise, more steps more damage, holds for it."""
    return all(growth[k] > (1 + GROWTH) * growth[1] for k in check_steps if k in growth)
