"""Drawn source images like the paper's: smooth, noise-free, generated-looking (no downloads).

`generated_source(name)` draws one as an array; `generated_sources(folder, n)` writes PNGs. The
demo, the Space's "generated sources" chains, the tests and the bench scripts use them.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from banana100.fileio import write_file_atomic


# ---------------------------------------------------------------------------------------------
# Generated sources: drawn here, like the paper's (smooth, noise-free, generated-looking)
#
# Banana100's 13 sources are AI-made images of at least 2K: skyscrapers, food, moss, peacock
# feathers, dunes, grids, gradients, occlusions. What matters to the metrics is what such images
# share: large smooth areas with no sensor noise (sky, walls, gradients), crisp anti-aliased
# edges, and some areas of fine regular texture. Photographs (the skimage samples) carry
# camera noise and texture everywhere, which hides exactly the effect the paper reports. These
# drawings are made of those ingredients; they are not the paper's images and not AI output.
# Their smooth areas are exact (flat or linear to the grey level): NIQE and BRISQUE warn that
# 6-57 % of their windows are such, where their step-0 scores depend on rounding (from the first
# simulated copy on, the grain leaves none); the protocol starts at step 1.

def _smooth_noise(rng, h, w, scale, octaves=4):
    """Band-limited value noise (sum of upsampled random grids), in [-1, 1]-ish."""
    out = np.zeros((h, w), np.float32)
    amp = 1.0
    for o in range(octaves):
        gh, gw = max(2, int(h / scale) + 2), max(2, int(w / scale) + 2)
        g = rng.standard_normal((gh, gw)).astype(np.float32)
        out += amp * np.asarray(Image.fromarray(g).resize((w, h), Image.BICUBIC))
        scale /= 2
        amp /= 2
    return out / 1.5

def _mix(a, b, t):
    t = np.clip(t, 0, 1)[..., None]
    return a * (1 - t) + b * t

def _col(*rgb):
    return np.array(rgb, np.float32)

def _draw_dunes(h, w, rng):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    y, x = yy / h, xx / w
    sky = _mix(_col(70, 130, 210), _col(245, 215, 180), y / 0.45)
    horizon = 0.42 + 0.06 * np.sin(x * 5.0 + 1.0) + 0.03 * np.sin(x * 13 + 2)
    ridge = 0.62 + 0.08 * np.sin(x * 3.2 + 0.5)
    shade = 0.5 + 0.5 * np.sin((x * 2.0 - y * 5.0) * 3.0)
    ripples = 0.5 + 0.5 * np.sin(2 * np.pi * (y * 90 + 4 * np.sin(x * 9) + 2 * _smooth_noise(rng, h, w, w / 6, 2)))
    sand = _mix(_col(200, 140, 80), _col(240, 190, 120), 0.6 * shade + 0.25 * ripples * (y > ridge))
    img = np.where((y > horizon)[..., None], sand, sky)
    return img

def _draw_skyline(h, w, rng):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    y, x = yy / h, xx / w
    img = _mix(_col(40, 60, 120), _col(250, 170, 110), y / 0.8)
    n = 9
    for i in range(n):
        x0 = i / n + 0.01 * rng.standard_normal()
        bw = 0.7 / n + 0.02 * rng.random()
        top = 0.15 + 0.45 * rng.random()
        inside = (x > x0) & (x < x0 + bw) & (y > top)
        facade = _col(*(rng.uniform(50, 120, 3)))
        lit = (facade * 0.7 + _col(255, 220, 150) * 0.3)
        shade = _mix(facade * 1.15, facade * 0.8, (x - x0) / bw)
        u, v = (x - x0) / bw * 8, (y - top) * h / (w / n / 8 * 1.3) / w * h
        win = ((u % 1) > 0.25) & ((u % 1) < 0.75) & ((v % 1) > 0.3) & ((v % 1) < 0.8)
        on = rng.random((int(v.max()) + 2, 10)) < 0.4
        lit_mask = win & on[np.clip(v.astype(int), 0, on.shape[0] - 1), np.clip(u.astype(int), 0, 9)]
        b = np.where(lit_mask[..., None], lit, np.where(win[..., None], shade * 0.6, shade))
        img = np.where(inside[..., None], b, img)
    return img

def _draw_spheres(h, w, rng):
    """Gradients and occlusions: soft-lit spheres in front of a studio backdrop."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    y, x = yy / h, xx / w
    img = _mix(_col(225, 225, 230), _col(120, 130, 150), (y - 0.2) / 0.8)
    floor = y > 0.7
    img = np.where(floor[..., None], _mix(_col(180, 170, 160), _col(110, 100, 95), (y - 0.7) / 0.3), img)
    for cx, cy, r, c in ((0.3, 0.55, 0.18, _col(220, 40, 40)), (0.55, 0.6, 0.2, _col(40, 160, 90)),
                         (0.75, 0.5, 0.15, _col(40, 80, 220))):
        d = np.sqrt((x - cx) ** 2 + ((y - cy) * h / w) ** 2) / r
        inside = d < 1
        nz = np.sqrt(np.clip(1 - d ** 2, 0, 1))
        light = np.clip(0.25 + 0.75 * (nz * 0.7 - (x - cx) / r * 0.4 - (y - cy) / r * 0.5), 0, 1.2)
        spec = np.clip(1 - np.sqrt((x - cx + 0.3 * r) ** 2 + ((y - cy) * h / w + 0.35 * r) ** 2) / (0.25 * r), 0, 1) ** 2
        s = c * light[..., None] + 255 * spec[..., None]
        img = np.where(inside[..., None], s, img)
    return img

def _draw_moss(h, w, rng):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    y, x = yy / h, xx / w
    n = _smooth_noise(rng, h, w, w / 4, 6)
    fine = _smooth_noise(rng, h, w, 12, 2)
    img = _mix(_col(40, 70, 20), _col(140, 180, 60), 0.5 + 0.35 * n + 0.25 * fine)
    stone = (((x - 0.7) / 0.25) ** 2 + ((y - 0.35) / 0.2) ** 2) < 1
    stone_c = _mix(_col(150, 150, 145), _col(90, 92, 95), y * 1.5 + 0.1 * _smooth_noise(rng, h, w, w / 3, 2))
    return np.where(stone[..., None], stone_c, img)

def _draw_feathers(h, w, rng):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    y, x = yy / h * (h / w), xx / w
    img = np.zeros((h, w, 3), np.float32) + _col(10, 60, 70)
    for cx in np.arange(0.1, 1.0, 0.27):
        for cy in np.arange(0.12, h / w, 0.3):
            dx, dy = x - cx, y - cy
            d = np.sqrt(dx ** 2 + (dy * 1.3) ** 2)
            ang = np.arctan2(dy, dx)
            barbs = 0.5 + 0.5 * np.sin(ang * 120)
            ring = _col(40, 130, 60)
            for r, c in ((0.09, _col(190, 150, 40)), (0.06, _col(20, 140, 160)), (0.035, _col(20, 20, 90))):
                ring = np.where((d < r)[..., None], c, ring)
            m = (d < 0.14)[..., None]
            img = np.where(m, ring * (0.8 + 0.2 * barbs[..., None]), img)
    return img

def _draw_grid(h, w, rng):
    """A tiled floor in perspective below a flat wall."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    y, x = yy / h, xx / w
    wall = _mix(_col(235, 228, 215), _col(200, 190, 175), x)
    horizon = 0.45
    z = 1.0 / np.maximum(y - horizon, 1e-3)
    u = (x - 0.5) * z * 4
    v = z * 2
    tiles = ((np.floor(u) + np.floor(v)) % 2)[..., None]
    floor = _mix(_col(60, 50, 45), _col(230, 225, 220), tiles[..., 0])
    return np.where((y > horizon + 0.02)[..., None], floor, wall)



#: Licence of the generated sources: they are drawn by this toolkit's own code.
GENERATED_SOURCES_LICENCE = "Apache-2.0"

#: name -> (what it stands for among the paper's sources, drawing function)
GENERATED_SOURCES = {
    "dunes": ("dunes: a smooth sky gradient over sand with fine ripples", _draw_dunes),
    "skyline": ("skyscrapers: flat facades, window grids, a dusk gradient", _draw_skyline),
    "spheres": ("gradients and occlusions: glossy spheres in front of a studio backdrop", _draw_spheres),
    "moss": ("moss: dense fine texture around a smooth stone", _draw_moss),
    "feathers": ("peacock feathers: repeated eye spots with fine radial barbs", _draw_feathers),
    "grid": ("grids: a checkered floor in perspective below a flat wall", _draw_grid),
}


def generated_source(name: str, side: int = 2048, seed: int = 0) -> np.ndarray:
    """One generated source (`GENERATED_SOURCES`) as an HxWx3 uint8 array, `side` wide, 4:3.

    Drawn at twice the size and shrunk with Lanczos, so edges are anti-aliased and smooth areas
    carry no noise at all: the look of generated images. Deterministic for a (name, side, seed).
    """
    if name not in GENERATED_SOURCES:
        from banana100.errors import Banana100Error

        raise Banana100Error(f"unknown generated source {name!r}; choose one of {', '.join(GENERATED_SOURCES)}")
    if side < 32:
        raise ValueError(f"generated sources need side >= 32, got {side}")
    from PIL import Image

    w, h = int(side), max(24, int(side) * 3 // 4)
    big = GENERATED_SOURCES[name][1](2 * h, 2 * w, np.random.default_rng(seed))
    img = Image.fromarray(np.clip(big + 0.5, 0, 255).astype(np.uint8))
    return np.asarray(img.resize((w, h), Image.LANCZOS))


def generated_sources(folder: Path, n: int, side: int = 2048) -> Path:
    """Write the first n generated sources as PNG into `folder` (kept when already there)."""
    from PIL import Image

    if not 1 <= n <= len(GENERATED_SOURCES):
        from banana100.errors import Banana100Error

        raise Banana100Error(f"chains must be between 1 and {len(GENERATED_SOURCES)} (one chain per generated source)")
    folder.mkdir(parents=True, exist_ok=True)
    for name in list(GENERATED_SOURCES)[:n]:
        target = folder / f"{name}.png"
        if not target.exists():
            png = io.BytesIO()
            Image.fromarray(generated_source(name, side)).save(png, format="PNG")
            write_file_atomic(target, png.getvalue())
    return folder
