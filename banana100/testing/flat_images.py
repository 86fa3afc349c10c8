"""Images with flat areas (issue 12), shared by tests/metrics/native/test_native_flat.py and the bench scripts
(bench/gpu/gpu_flat_check.py, bench/metrics/native_agreement.py, ...). Made from skimage's sample images:
nothing here needs ../shared, and importing this module has no side effects (unlike conftest)."""

from __future__ import annotations

import numpy as np
import skimage.data as skimage_data


def grey3(a: np.ndarray) -> np.ndarray:
    """An skimage sample as HxWx3 uint8 (bool -> 0/255, grey replicated, alpha dropped)."""
    a = np.asarray(a)
    if a.dtype == bool:
        a = a.astype(np.uint8) * 255
    a = a.astype(np.uint8)
    return np.repeat(a[..., None], 3, axis=2) if a.ndim == 2 else np.ascontiguousarray(a[..., :3])


def flat_patch_image(h: int, w: int, colour: bool, patch: int = 11, seed: int = 0) -> np.ndarray:
    """A photo (coffee, or camera in grey) cropped to h x w with 256 flat patches, one per
    luminance level 0..255, on a 16 x 16 grid (each patch holds (patch - 6)^2 flat 7x7 windows).

    Colour: each patch a colour of its own whose YIQ luminance rounds to the level; grey: the
    level itself on a grey photo."""
    rng = np.random.default_rng(seed)
    base = grey3(skimage_data.coffee() if colour else skimage_data.camera())[:h, :w].copy()
    pitch = (min(h, w) - 2) // 16
    assert pitch >= patch, "image too small for 256 patches"
    for level in range(256):
        top, left = 1 + (level // 16) * pitch, 1 + (level % 16) * pitch
        if colour:
            r, b = np.clip(level + rng.integers(-60, 61, size=2), 0, 255)
            g = np.clip(round((level - 0.299 * r - 0.114 * b) / 0.587), 0, 255)
            rgb = (r, g, b)
        else:
            rgb = (level, level, level)
        base[top : top + patch, left : left + patch] = rgb
    return base


def large_patch_image(levels: list[int], size: int = 320, patch: int = 30) -> np.ndarray:
    """skimage's camera (grey) cropped to size x size with a flat patch x patch square per level,
    in rows: large enough that the half scale keeps flat 7x7 windows (resampled, non-integer
    values), one distinct value per level."""
    base = grey3(skimage_data.camera())[:size, :size].copy()
    per_row = size // (patch + 2)
    for k, level in enumerate(levels):
        top, left = 1 + (k // per_row) * (patch + 2), 1 + (k % per_row) * (patch + 2)
        base[top : top + patch, left : left + patch] = level
    return base


def flat_images() -> list[tuple[str, np.ndarray]]:
    return [(f"{'colour' if c else 'grey'}-{h}x{w}", flat_patch_image(h, w, c))
            for c in (True, False) for h, w in ((224, 240), (213, 331))]


def synthetic_images() -> list[tuple[str, np.ndarray]]:
    """skimage's synthetic images, clipped photos and a photo with a clipped sky."""
    out = [(n, grey3(getattr(skimage_data, n)())) for n in ("horse", "checkerboard")]
    out.append(("binary_blobs", grey3(skimage_data.binary_blobs(length=256, rng=1))))
    out += [(f"{n} stretched x2, clipped", stretched_clipped(n)) for n in ("camera", "coffee")]
    sky = grey3(skimage_data.camera()).astype(np.float64)  # the sky is the top third
    out.append(("camera, sky clipped at 200", np.clip(sky * 1.4, 0, 200).round().astype(np.uint8)))
    return out


def stretched_clipped(name: str) -> np.ndarray:
    """skimage sample `name` with its contrast stretched x2 about 80 and clipped to 0..255."""
    a = grey3(getattr(skimage_data, name)()).astype(np.float64)
    return np.clip((a - 80) * 2.0, 0, 255).round().astype(np.uint8)
