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

from banana100.metrics.native import matlab, repair

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
        normalized, centred = _local_normalization(gray, self.gauss, float32=self.mode == "pyiqa")
        # share of 7x7 windows that are flat or exact ramps (PIQE itself is insensitive there:
        # its criteria are thresholds at 0.1, far above rounding leftovers; bench/metrics/flat_regime.py),
        # from PIQE's own x - mu: the same window and padding as the share's definition
        self.last_flat_share = repair.centred_share(centred[:, 0])
        return piqe_score(normalized)

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


def piqe_score(normalized: torch.Tensor) -> torch.Tensor:
    """PIQE of (B, 1, H, W) locally normalised gray images (`_local_normalization`); only whole
    16x16 blocks count.

    Block statistics come from per-column sums in float64 (one pass over the image) rather than
    per-block `std` calls on strided views; in float64 they stay within 1e-12 of the two-pass
    values, far from the thresholds' resolution.
    """
    b, _, h, w = normalized.shape
    rows, cols = h // BLOCK, w // BLOCK
    # (B, rows, 16, cols, 16): pixel (i, j) of block (r, c) at [:, r, i, c, j]
    grid = normalized[:, 0, : rows * BLOCK, : cols * BLOCK].reshape(b, rows, BLOCK, cols, BLOCK)
    col_sum = grid.sum(dim=2)  # (B, rows, cols, 16): each block's column sums
    col_sq = (grid * grid).sum(dim=2)
    n = BLOCK * BLOCK
    block_var = _variance(col_sum.sum(-1), col_sq.sum(-1), n)
    active = block_var > ACTIVITY_THRESHOLD

    # top and bottom rows, left and right columns of every block, as (B, rows, cols, 4, 16)
    edges = torch.stack([grid[:, :, 0], grid[:, :, -1], grid[..., 0].transpose(2, 3), grid[..., -1].transpose(2, 3)], dim=-2)
    impaired = _noticeable_artifacts(edges)
    noisy = _noise_criterion(col_sum, col_sq, block_var)

    dist = active * (impaired * (1 - block_var) + noisy * block_var)
    return (dist.flatten(1).sum(dim=1) + 1) / (active.flatten(1).sum(dim=1) + 1) * 100


def _local_normalization(gray: torch.Tensor, gauss: torch.Tensor, float32: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(x - mu) / (sigma + 1) of (B, 1, H, W) gray images on the 0-255 scale with a 7x7 Gaussian
    window and replicated borders, as float64; and x - mu, in the arithmetic's dtype.

    In float32 (pyiqa) the two windows are one grouped convolution with pyiqa's 2-D kernel,
    which keeps pyiqa's arithmetic bit for bit: its sigma = sqrt(E[x^2] - mu^2) cancels badly
    in float32 on flat areas, which moves block statistics across the 0.1 thresholds, so
    matching pyiqa needs the same arithmetic. In float64 (MATLAB) a separable pair of 1-D
    passes (the Gaussian is an outer product), equal to the 2-D filter to ~1e-13.
    """
    dtype = torch.float32 if float32 else torch.float64
    gray = gray.to(dtype)
    padded = F.pad(gray, (3, 3, 3, 3), mode="replicate")
    both = torch.cat([padded, padded * padded], dim=1)
    kernel = gauss.to(device=gray.device, dtype=dtype)
    if float32:
        moments = matlab.conv2d(both, kernel.view(1, 1, 7, 7).repeat(2, 1, 1, 1), groups=2)
    else:
        taps = kernel.sum(dim=1)  # the Gaussian is an outer product: its column sums are the 1-D taps
        moments = matlab.conv2d(both, taps.view(1, 1, 7, 1).repeat(2, 1, 1, 1), groups=2)
        moments = matlab.conv2d(moments, taps.view(1, 1, 1, 7).repeat(2, 1, 1, 1), groups=2)
    mu, second = moments[:, :1], moments[:, 1:]
    sigma = torch.sqrt((second - mu * mu).abs())
    centred = gray - mu
    return (centred / (sigma + 1)).to(torch.float64), centred


def _variance(total: torch.Tensor, total_sq: torch.Tensor, n: int) -> torch.Tensor:
    """Sample variance (n - 1) from a sum and a sum of squares, never below 0."""
    return ((total_sq - total * total / n) / (n - 1)).clamp(min=0)


def _noise_criterion(col_sum: torch.Tensor, col_sq: torch.Tensor, block_var: torch.Tensor) -> torch.Tensor:
    """Blocks whose centre/surround deviation ratio marks Gaussian noise."""
    sigma = block_var.sqrt()
    # centre: 1-based columns 8 and 9; MATLAB then deletes column 8 and, of what is left,
    # column 9 (= original column 10), so the surround keeps column 9
    centre = _variance(col_sum[..., 7] + col_sum[..., 8], col_sq[..., 7] + col_sq[..., 8], 2 * BLOCK)
    surround = _variance(col_sum.sum(-1) - col_sum[..., 7] - col_sum[..., 9],
                         col_sq.sum(-1) - col_sq[..., 7] - col_sq[..., 9], (BLOCK - 2) * BLOCK)
    ratio = torch.nan_to_num(centre.sqrt() / surround.sqrt())
    beta = (sigma - ratio).abs() / torch.maximum(sigma, ratio)
    return sigma > 2 * beta


def _noticeable_artifacts(edges: torch.Tensor) -> torch.Tensor:
    """Blocks with a flat 6-pixel segment on any of their four edges; edges is (..., 4, 16)."""
    zero = edges.new_zeros(edges.shape[:-1] + (1,))
    run = torch.cat([zero, edges.cumsum(-1)], dim=-1)
    run_sq = torch.cat([zero, (edges * edges).cumsum(-1)], dim=-1)
    seg_sum = run[..., SEGMENT:] - run[..., :-SEGMENT]  # (..., 4, 11) sums of each 6-pixel segment
    seg_sq = run_sq[..., SEGMENT:] - run_sq[..., :-SEGMENT]
    flat = _variance(seg_sum, seg_sq, SEGMENT) < IMPAIRED_THRESHOLD**2
    return flat.flatten(-2).any(dim=-1)
