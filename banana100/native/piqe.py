"""PIQE (Venkatanath et al. 2015), batched over images and vectorised over 16x16 blocks.

Two modes differ only in how the gray image is made and padded:

- "pyiqa": pyiqa 0.1.16's `piqe` -- YIQ luma in float32, stretched so its maximum is 255 and
  rounded, then padded symmetrically by `size % 16` (pyiqa's amount; the blocks that do not fit
  are dropped). Sides under 8 pixels leave no whole block, where pyiqa fails: refused here too.
- "official": MATLAB's `piqe` -- replicate padding up to a multiple of 16, `rgb2gray` of the
  uint8 image (rounded), no stretching. Works from 1 pixel.

Everything after that (Gaussian local normalisation, block activity, noticeable-artifact and
noise criteria, pooling) is the same in both, and identical to MATLAB's block loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
import torch.nn.functional as F

from banana100.native import matlab

BLOCK = 16
ACTIVITY_THRESHOLD = 0.1
IMPAIRED_THRESHOLD = 0.1
SEGMENT = 6
PYIQA_MIN_SIDE = 8


def build(files: Mapping[str, Path] | None = None, mode: str = "pyiqa") -> torch.nn.Module:
    """PIQE needs no parameter files; `files` is accepted for the common signature."""
    return PIQE(mode)


class PIQE(torch.nn.Module):
    """forward(Bx3xHxW in [0, 1]) -> B PIQE scores (0 best, 100 worst), float64."""

    def __init__(self, mode: str = "pyiqa") -> None:
        super().__init__()
        if mode not in ("pyiqa", "official"):
            raise ValueError(f"piqe: mode must be 'pyiqa' or 'official', got {mode!r}")
        self.mode = mode
        # pyiqa stores its fspecial kernel in float32; MATLAB's imgaussfilt keeps float64
        kernel = matlab.fspecial_gaussian(7, 7.0 / 6.0, float32=mode == "pyiqa")
        self.register_buffer("gauss", kernel, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gray = self._pyiqa_gray(x) if self.mode == "pyiqa" else self._matlab_gray(x)
        return piqe_score(gray, self.gauss, float32_normalization=self.mode == "pyiqa")

    def _pyiqa_gray(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        if min(h, w) < PYIQA_MIN_SIDE:
            raise ValueError(f"piqe (pyiqa mode) needs images of at least {PYIQA_MIN_SIDE}x{PYIQA_MIN_SIDE}, got {w}x{h} (width x height)")
        # float32 as pyiqa, so that values landing on .5 round the same way
        weights = torch.tensor(matlab.YIQ_Y, dtype=torch.float32, device=x.device)
        y = torch.einsum("bchw,c->bhw", x.to(torch.float32), weights).unsqueeze(1)
        peak = y.flatten(1).max(dim=1).values.view(-1, 1, 1, 1)
        y = torch.round(255 * (y / peak)).to(torch.float64)
        # pyiqa pads by `size % 16` (not up to a multiple): mirror that, then drop partial blocks
        return _symmetric_post(y, h % BLOCK, w % BLOCK)

    def _matlab_gray(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        rgb = matlab.from_unit_float(x)
        rgb = F.pad(rgb, (0, -w % BLOCK, 0, -h % BLOCK), mode="replicate")
        return matlab.rgb2gray(rgb, uint8=True)


def _symmetric_post(x: torch.Tensor, pad_h: int, pad_w: int) -> torch.Tensor:
    """Mirror-pad (border pixel repeated) at the bottom and right of (..., H, W)."""
    if pad_h == 0 and pad_w == 0:
        return x
    h, w = x.shape[-2:]
    rows = torch.cat([torch.arange(h, device=x.device), torch.arange(h - 1, h - 1 - pad_h, -1, device=x.device)])
    cols = torch.cat([torch.arange(w, device=x.device), torch.arange(w - 1, w - 1 - pad_w, -1, device=x.device)])
    return x[..., rows[:, None], cols[None, :]]


def piqe_score(gray: torch.Tensor, gauss: torch.Tensor, float32_normalization: bool = False) -> torch.Tensor:
    """PIQE of (B, 1, H, W) gray images on the 0-255 scale; only whole 16x16 blocks count.

    `float32_normalization` computes the local normalisation in float32 as pyiqa does: its
    sigma = sqrt(E[x^2] - mu^2) cancels badly in float32 on flat areas, which moves block
    statistics across the 0.1 thresholds, so matching pyiqa needs the same arithmetic.
    """
    b = gray.shape[0]
    dtype = torch.float32 if float32_normalization else torch.float64
    gray = gray.to(dtype)
    kernel = gauss.to(device=gray.device, dtype=dtype).view(1, 1, 7, 7)
    padded = F.pad(gray, (3, 3, 3, 3), mode="replicate")
    mu = F.conv2d(padded, kernel)
    second = F.conv2d(padded * padded, kernel)
    sigma = torch.sqrt((second - mu * mu).abs())
    normalized = ((gray - mu) / (sigma + 1)).to(torch.float64)

    # (B, nblocks, 16, 16), blocks in row-major order
    blocks = normalized[:, 0].unfold(1, BLOCK, BLOCK).unfold(2, BLOCK, BLOCK).reshape(b, -1, BLOCK, BLOCK)
    block_var = blocks.var(dim=(-2, -1))
    active = block_var > ACTIVITY_THRESHOLD
    impaired = _noticeable_artifacts(blocks)
    noisy = _noise_criterion(blocks, block_var)

    dist = active * (impaired * (1 - block_var) + noisy * block_var)
    return (dist.sum(dim=1) + 1) / (active.sum(dim=1) + 1) * 100


def _noise_criterion(blocks: torch.Tensor, block_var: torch.Tensor) -> torch.Tensor:
    """Blocks whose centre/surround deviation ratio marks Gaussian noise."""
    sigma = block_var.sqrt()
    # centre: 1-based columns 8 and 9; MATLAB then deletes column 8 and, of what is left,
    # column 9 (= original column 10), so the surround keeps column 9
    centre = blocks[..., 7:9]
    keep = [c for c in range(BLOCK) if c not in (7, 9)]
    surround = blocks[..., keep]
    ratio = centre.std(dim=(-2, -1)) / surround.std(dim=(-2, -1))
    ratio = torch.nan_to_num(ratio)
    beta = (sigma - ratio).abs() / torch.maximum(sigma, ratio)
    return sigma > 2 * beta


def _noticeable_artifacts(blocks: torch.Tensor) -> torch.Tensor:
    """Blocks with a flat 6-pixel segment on any of their four edges."""
    edges = torch.stack([blocks[..., 0, :], blocks[..., :, -1], blocks[..., -1, :], blocks[..., :, 0]], dim=-2)
    segments = edges.unfold(-1, SEGMENT, 1)  # (B, nblocks, 4, 11, 6)
    return (segments.std(dim=-1) < IMPAIRED_THRESHOLD).flatten(-2).any(dim=-1)
