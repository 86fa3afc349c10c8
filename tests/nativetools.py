"""What the native-metric tests share: the reference images as tensors and the relative difference."""

from __future__ import annotations

from pathlib import Path

import torch
from conftest import REFERENCE_IMAGES

from banana100.engine import to_tensor
from banana100.imageio import load_rgb

IMAGES = sorted(p for p in REFERENCE_IMAGES.glob("*/*") if p.suffix.lower() in (".bmp", ".png", ".gif"))


def load(path: Path) -> torch.Tensor:
    """A file as the engine hands it to a model: 1x3xHxW float32 in [0, 1] (pyiqa's reading)."""
    return to_tensor(load_rgb(path))[None]


def rel(a, b) -> float:
    """Largest |a - b| / |b| over the scores."""
    a, b = torch.as_tensor(a).double().reshape(-1), torch.as_tensor(b).double().reshape(-1)
    return ((a - b).abs() / b.abs().clamp(min=1e-12)).max().item()
