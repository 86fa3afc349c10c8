"""NIQE (Mittal, Soundararajan and Bovik 2012), batched and vectorised over all patches.

The image (luminance, 0-255) is cropped to whole 96x96 blocks; at two scales (the second a
MATLAB bicubic half) the MSCN coefficients of every block give 18 AGGD features; the score is
the Mahalanobis-like distance between the pristine Gaussian model and the Gaussian fitted to the
blocks' 36-dim features.

mode "pyiqa": pyiqa 0.1.16's preprocessing (its YIQ luminance, rounded in float32; its Gaussian
window stored in float32; +eps in the local deviation). mode "official": LIVE's
`computequality.m` on the uint8 image (MATLAB rgb2gray, rounded; float64 window). Both work in
float64. The full-scale filtering is exact (bit-for-bit pyiqa's float64 conv2d), which matters:
on flat areas and ramps the MSCN coefficients are rounding-sized and their signs are counted.
In mode "pyiqa" the half scale is pyiqa's float32 resize (`matlab.pyiqa_imresize`, bit for bit)
and its flat windows / exact ramps get pyiqa's own float64 conv2d leftovers
(`repair.repair_leftovers`): checkerboards and clipped areas agree to ~1e-7.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from banana100.metrics.native import matlab, nss, repair
from banana100.metrics.native.params import read_niqe_mat

PARAM_FILE = "niqe_modelparameters.mat"
BLOCK = 96
MIN_SIZE = BLOCK


def block_features(mscn_blocks: torch.Tensor) -> torch.Tensor:
    """LIVE `computefeature` of MSCN blocks (..., P, h, w) -> (..., P, 18)."""
    flat = mscn_blocks.flatten(-2)
    alpha, left, right = nss.estimate_aggd(flat)
    scale = nss.gamma_ratio_sqrt(alpha)
    feats = [alpha.unsqueeze(-1), ((left + right) * scale / 2).unsqueeze(-1)]
    # products with the block circularly shifted inside itself (circshift of each block)
    pairs = nss.paired_products(mscn_blocks, nss.NIQE_SHIFTS).flatten(
        -2
    )  # (..., P, 4, h*w)
    alpha, left, right = nss.estimate_aggd(pairs)
    scale = nss.gamma_ratio_sqrt(alpha)
    beta_l, beta_r = left * scale, right * scale
    mean = (beta_r - beta_l) * torch.exp(
        torch.lgamma(2 / alpha) - torch.lgamma(1 / alpha)
    )
    feats.append(
        torch.stack([alpha, mean, beta_l, beta_r], dim=-1).flatten(-2)
    )  # (..., P, 16)
    return torch.cat(feats, dim=-1)


class NIQE(nss.ChunkedScoring):
    """forward(Bx3xHxW float32 in [0, 1]) -> B float64 NIQE scores (lower is better);
    `last_flat_share` (B,) then holds each image's share of (cropped, full-scale) windows where
    the MSCN coefficient is a rounding leftover."""

    def __init__(self, mu: torch.Tensor, cov: torch.Tensor, mode: str):
        super().__init__()
        self.mode = mode
        self.register_buffer("mu_pristine", mu.to(torch.float64))
        self.register_buffer("cov_pristine", cov.to(torch.float64))
        self.register_buffer(
            "window", matlab.fspecial_gaussian(7, 7 / 6, float32=mode == "pyiqa")
        )
        self.sigma_eps = torch.finfo(torch.float64).eps if mode == "pyiqa" else 0.0

    def luminance(self, x: torch.Tensor) -> torch.Tensor:
        """Bx3xHxW [0, 1] -> Bx1xHxW float64 luminance on 0-255, rounded as the mode's original."""
        if self.mode == "pyiqa":
            return matlab.pyiqa_y_channel(x, "yiq")
        return matlab.rgb2gray(matlab.from_unit_float(x), uint8=True)

    def features(self, y: torch.Tensor) -> torch.Tensor:
        """Bx1xHxW luminance -> (B, P, 36) block features at both scales."""
        h, w = y.shape[-2:]
        nh, nw = h // BLOCK, w // BLOCK
        if nh == 0 or nw == 0:
            raise ValueError(
                f"NIQE needs at least {BLOCK}x{BLOCK} pixels, got {w}x{h} (width x height)"
            )
        img = y[..., : nh * BLOCK, : nw * BLOCK].squeeze(-3)
        per_scale = []
        for scale in (1, 2):
            # scale 1 holds 0..255 integers: exact filtering; scale 2 is resampled
            filtering = "exact_uint8" if scale == 1 else "near_separable"
            # flat windows and exact ramps of the resampled image get pyiqa's own leftovers
            exact_leftovers = scale == 2 and self.mode == "pyiqa" and img.device.type == "cpu"
            structdis, centred = nss.mscn(
                img,
                self.window,
                "replicate",
                sigma_eps=self.sigma_eps,
                filtering=filtering,
                with_centred=True,
            )
            if scale == 1:  # the flat share, from this filtering's x - mu (no second pass)
                self._share = repair.centred_share(centred)
            if exact_leftovers:
                repair.repair_leftovers(structdis, img, centred, self.window, "replicate")
            size = BLOCK // scale
            per_scale.append(block_features(nss.blocks(structdis, size, size)))
            if scale == 1 and self.mode == "pyiqa":
                # pyiqa resizes img / 255 in float32 (its imresize casts to float32 and back),
                # summing the taps in its own order: flat areas keep its values to the last bit
                half = (img.shape[-2] // 2, img.shape[-1] // 2)
                img = matlab.pyiqa_imresize(img / 255.0, half) * 255.0
            elif scale == 1:
                img = matlab.imresize(img, scale=0.5)
        return torch.cat(per_scale, dim=-1)

    def score(self, x: torch.Tensor) -> torch.Tensor:
        """Scores of a batch, in one pass."""
        feats = self.features(self.luminance(x))
        mu_d = nss.nanmean_rows(feats)
        cov_d = nss.nancov_rows(feats)
        inv = torch.linalg.pinv((self.cov_pristine + cov_d) / 2)
        diff = (self.mu_pristine - mu_d).unsqueeze(-2)  # (B, 1, 36)
        return torch.sqrt((diff @ inv @ diff.transpose(-1, -2)).reshape(-1))


def build(files: Mapping[str, Path], mode: str = "pyiqa") -> NIQE:
    """The native NIQE module from the LIVE `modelparameters.mat` (table name niqe_modelparameters.mat)."""
    if mode not in ("pyiqa", "official"):
        raise ValueError(f"niqe: mode must be 'pyiqa' or 'official', got {mode!r}")
    mu, cov = read_niqe_mat(files[PARAM_FILE])
    return NIQE(torch.from_numpy(mu), torch.from_numpy(cov), mode)
