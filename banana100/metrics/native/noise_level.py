"""A texture-robust noise-level estimate: the smallest eigenvalues of the patch covariance.

Chen, Zhu & Heng, "An efficient statistical method for image noise level estimation" (ICCV
2015): the covariance of an image's patches has its content in a few large eigenvalues and the
noise spread over all of them; the eigenvalues that are noise alone are the smallest ones, found
as the largest set of smallest eigenvalues whose mean equals their median (the noise part of a
sample covariance spreads symmetrically, Marchenko-Pastur, so a set that has taken in content is
skewed upward). The noise variance is that mean. Following Liu, Tanaka & Okutomi ("Single-image
noise level estimation for blind denoising", IEEE TIP 2013), the covariance is taken over weak-
texture patches only (here: the caller's weight per patch, e.g. the flatter tiles), so that dense
texture does not fill the small eigenvalues.

For white noise the estimate reads its standard deviation; grain correlated over a pixel or more
reads lower (its power sits in the smooth directions, among the content), which is why the
detector keeps its band-pass floor beside it.

`pca_noise_level(luma, weight)`: luma (B,1,H,W), weight (B, n_patches) or None -> (B,) float64
sigma in luma's units. Batched, float64 statistics, no host synchronisation (CPU or CUDA).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

PATCH = 8  # non-overlapping 8x8 patches: aligned with 16x16 tiles, 64 dimensions


def patches(luma: torch.Tensor, patch: int = PATCH) -> torch.Tensor:
    """(B, patch*patch, n) float64 non-overlapping patches of the top-left crop that holds whole ones."""
    h, w = luma.shape[-2:]
    crop = luma[..., :h // patch * patch, :w // patch * patch]
    return F.unfold(crop, patch, stride=patch).to(torch.float64)


def pca_noise_level(luma: torch.Tensor, weight: torch.Tensor | None = None, patch: int = PATCH) -> torch.Tensor:
    """Chen et al.'s noise standard deviation of each image (B,) float64, over patches weighted by `weight`."""
    x = patches(luma, patch)  # (B, d, n)
    b, d, n = x.shape
    w = torch.ones(b, n, dtype=x.dtype, device=x.device) if weight is None else weight.to(x.dtype)
    wsum = w.sum(1).clamp(min=1e-12)
    mean = (x * w[:, None]).sum(2) / wsum[:, None]
    xc = x - mean[..., None]
    cov = (xc * w[:, None]) @ xc.transpose(1, 2) / wsum[:, None, None]
    ev = torch.linalg.eigvalsh(cov).clamp(min=0)  # ascending
    # tau_k: the mean of the k smallest; the set is noise alone when as many lie above tau_k as below
    k = torch.arange(1, d + 1, device=x.device)
    tau = ev.cumsum(1) / k
    inside = torch.arange(d, device=x.device)[None, :] < k[:, None]  # (k, j): eigenvalue j in the k smallest
    above = ((ev[:, None, :] > tau[:, :, None]) & inside).sum(2)
    below = ((ev[:, None, :] < tau[:, :, None]) & inside).sum(2)
    ok = (above == below) & (k < d)[None]  # never all d: the largest holds the content
    # the largest such k (k = 1 always qualifies)
    best = torch.where(ok, k[None].expand(b, -1), torch.zeros_like(ok, dtype=k.dtype)).amax(1).clamp(min=1)
    return tau.gather(1, (best - 1)[:, None])[:, 0].sqrt()
