"""What the native-metric tests share: the reference images as tensors, the relative difference
(pyiqa's NRQM feature stage, which bench scripts use too, is banana100.testing.nrqm_reference)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
from repopaths import REFERENCE_IMAGES

from banana100.metrics.engine.scorer import to_tensor
from banana100.imageio import load_rgb

IMAGES = sorted(p for p in REFERENCE_IMAGES.glob("*/*") if p.suffix.lower() in (".bmp", ".png", ".gif"))


def load(path: Path) -> torch.Tensor:
    """A file as the engine hands it to a model: 1x3xHxW float32 in [0, 1] (pyiqa's reading)."""
    return to_tensor(load_rgb(path))[None]


def missing_reason(*names: str) -> str | None:
    """Why a test on these reference images cannot run here (None when they are all present)."""
    absent = [n for n in names if not any(p.name == n for p in IMAGES)]
    if not absent:
        return None
    return (f"reference image(s) {', '.join(absent)} not found under {REFERENCE_IMAGES} "
            "(the read-only ../shared folder beside the repository; not downloadable)")


@cache
def image(name: str) -> torch.Tensor:
    """A reference image by file name, loaded once (callers clone before writing into it).

    Inside a test, an absent image skips the test with a reason naming the file."""
    why = missing_reason(name)
    if why:
        pytest.skip(why)
    return load(next(p for p in IMAGES if p.name == name))


# the five 512x512 IL-NIQE peppers are slow on two shared cores; tid2013 and piq run by default
IMAGE_NAMES = [pytest.param(p.name, marks=pytest.mark.slow) if "pepper" in p.name else p.name for p in IMAGES] or [
    pytest.param(None, marks=pytest.mark.skip(
        reason=f"no reference images under {REFERENCE_IMAGES} (the read-only ../shared folder; not downloadable)"))]


def colour_and_grey_crops(sizes, top: int, left: int):
    """(label, 1x3xhxw crop) of I01.BMP and of goldhill.gif (grey, replicated) for each (h, w).

    Called at collection (parametrize): without the images it yields skipped params naming them."""
    why = missing_reason("I01.BMP", "goldhill.gif")
    if why:
        for h, w in sizes:
            for kind in ("colour", "grey"):
                yield pytest.param(f"{kind}-{h}x{w}", None, marks=pytest.mark.skip(reason=why))
        return
    colour = image("I01.BMP")
    grey = to_tensor(np.repeat(load_rgb(REFERENCE_IMAGES / "piq" / "goldhill.gif")[..., :1], 3, axis=-1))[None]
    for h, w in sizes:
        yield f"colour-{h}x{w}", colour[..., top : top + h, left : left + w]
        yield f"grey-{h}x{w}", grey[..., top : top + h, left : left + w]


def rel(a, b) -> float:
    """Largest |a - b| / |b| over the scores."""
    a, b = torch.as_tensor(a).double().reshape(-1), torch.as_tensor(b).double().reshape(-1)
    return ((a - b).abs() / b.abs().clamp(min=1e-12)).max().item()
