"""Perceptual Index (PIRM 2018): PI = ((10 - NRQM) + NIQE) / 2 on the YCbCr luma, 4-pixel border shaved.

Both parts score the same luma: NRQM through `banana100.metrics.native.nrqm`, NIQE through
`banana100.metrics.native.niqe` (given the luma as three equal channels, which both of its modes turn
back into exactly that luma).

- "pyiqa": pyiqa 0.1.16's `pi` (its `rgb2ycbcr` luma rounded in float32, NRQM and NIQE in
  pyiqa mode).
- "official": the PIRM2018 MATLAB code (`convert_shave_image`: MATLAB `rgb2ycbcr` of the uint8
  image, Y channel, shaved by 4; `quality_predict` and LIVE's `computequality`), with NRQM and
  NIQE in official mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from banana100.metrics.native import matlab, niqe, nrqm, repair

SHAVE = 4


class PI(torch.nn.Module):
    """forward(Bx3xHxW in [0, 1]) -> B PI scores (lower is better), float64."""

    def __init__(self, nrqm_module: nrqm.NRQM, niqe_module: torch.nn.Module, mode: str = "pyiqa") -> None:
        super().__init__()
        if mode not in ("pyiqa", "official"):
            raise ValueError(f"pi: mode must be 'pyiqa' or 'official', got {mode!r}")
        self.mode = mode
        self.nrqm = nrqm_module
        self.niqe = niqe_module

    def luminance(self, x: torch.Tensor) -> torch.Tensor:
        """Bx3xHxW [0, 1] -> the shaved Bx1xHxW YCbCr luma on 0-255 (integers), float64."""
        if self.mode == "pyiqa":
            y = matlab.pyiqa_y_channel(x, "ycbcr")
        else:
            rgb = matlab.from_unit_float(x)
            weights = torch.tensor(matlab.YCBCR_Y, dtype=torch.float64, device=x.device) / 255
            y = matlab.to_uint8(torch.einsum("bchw,c->bhw", rgb, weights).unsqueeze(1) + 16)
        return y[..., SHAVE:-SHAVE, SHAVE:-SHAVE]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.luminance(x)
        # share of flat (or exact-ramp) 7x7 luminance windows (`repair.leftover_share`)
        self.last_flat_share = repair.leftover_share(y[:, 0])
        nrqm_score = self.nrqm.score_luminance(y)
        niqe_score = self.niqe((y / 255).expand(-1, 3, -1, -1).to(torch.float32))
        return ((10 - nrqm_score) + niqe_score.to(torch.float64)) / 2


def build(files: Mapping[str, Path], mode: str = "pyiqa") -> PI:
    """The native PI module; files: "NRQM_model.mat" and "niqe_modelparameters.mat"."""
    if mode not in ("pyiqa", "official"):
        raise ValueError(f"pi: mode must be 'pyiqa' or 'official', got {mode!r}")
    return PI(nrqm.build(files, mode), niqe.build(files, mode), mode)
