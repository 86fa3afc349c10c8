"""Deterministic test images: frames of a simulated-editor chain of skimage's coffee, the same
frames with flat areas, and the hard images the native snapshot scores (uniform, ramp,
checkerboard, half-black noise, saturated noise)."""

from __future__ import annotations

import numpy as np


def chain_images(n: int, size: int) -> list[np.ndarray]:
    """n different size x size RGB images: steps of a simulated-editor chain of coffee, resized."""
    import skimage.data
    from PIL import Image

    from banana100.chains.editors.simulated import SimulatedEditor

    base = np.asarray(Image.fromarray(skimage.data.coffee()).resize((size, size), Image.BICUBIC))
    editor, out, x = SimulatedEditor(), [], base
    for step in range(n):
        out.append(x)
        x = editor.apply(x, seed=step + 1)
    return out


def flat_chain_images(n: int, size: int) -> list[np.ndarray]:
    """`chain_images` with flat areas (issue 12): the top 30 % clipped to one grey (a sky) and a
    contrast stretch x1.5 that clips highlights and shadows: the regime where the native code
    recomputes pyiqa's rounding leftovers."""
    out = []
    for k, img in enumerate(chain_images(n, size)):
        img = np.clip((img.astype(np.float64) - 128) * 1.5 + 128, 0, 255).round().astype(np.uint8)
        img[: int(0.3 * size)] = 60 + 40 * k % 190
        out.append(img)
    return out


def hard_images() -> list[np.ndarray]:
    """A uniform grey, a horizontal ramp, a checkerboard, noise with a black half, saturated noise."""
    rng = np.random.default_rng(0)
    out = [np.full((200, 300, 3), 128, np.uint8),
           np.tile(np.arange(256, dtype=np.uint8)[None, :, None], (96, 1, 3))]
    board = ((np.indices((128, 160)).sum(0) % 2) * 255).astype(np.uint8)
    out.append(np.stack([board] * 3, -1))
    half = rng.integers(0, 256, (192, 192, 3), dtype=np.uint8)
    half[:96] = 0
    out.append(half)
    out.append(np.clip(rng.normal(128, 200, (160, 224, 3)), 0, 255).astype(np.uint8))
    return out


def snapshot_images() -> list[np.ndarray]:
    """The native snapshot's images: 3 chain frames and 3 flat frames at 512 px, then `hard_images`."""
    return chain_images(3, 512) + flat_chain_images(3, 512) + hard_images()
