"""NRQM (Ma et al. 2017), batched over same-size images and vectorised over blocks.

Three feature groups on the luminance (0-255), each scored by its own regression forest, then
a linear blend:

- f1 (18): block DCT statistics at three Gaussian-pyramid levels -- per 7x7 block (stride 3) the
  generalised-Gaussian shape of the AC coefficients, their coefficient of variation, and the
  spread of that across three frequency orientations; pooled as the mean and a 10 % tail mean.
- f2 (45): a 2-scale, 6-orientation complex steerable pyramid; divisive normalisation of each band
  by its neighbourhood (3x3, parent, other orientations); GGD shapes per band and across scales,
  and SSIM contrast-structure between scales and between orientations.
- f3 (75): singular values of the 5x5 distinct blocks at the three pyramid levels.

Regression: `NRQM_model.mat` as the original release stores it (randomforest-matlab trees:
daughter indices, split thresholds, node values, split features), read in place. The trees are
walked for every image and every tree at once, one depth level per step.

Modes: "pyiqa" reproduces pyiqa 0.1.16's `nrqm` (YIQ luma rounded in float32, no crop).
"official" is the same computation in float64 on MATLAB's `rgb2gray` of the uint8 image (the
original `feature_all.m` is not at hand; rgb2gray is assumed, its weights being those of the YIQ
luma with which pyiqa lands within 0.3 % of the published scores). Unverified until
NRQM_model.mat is available (tests/metrics/native/test_native_nrqm.py, `needs_weights`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from banana100.metrics.native import matlab, repair
from banana100.errors import ParameterFileError

PARAM_FILE = "NRQM_model.mat"
NUM_BANDS = 6
SSIM_C2 = (0.03 * 255) ** 2  # pyiqa's ssim(..., data_range=255)
MIN_SIDE = 45  # the orientation SSIM needs an 11x11 window inside the band cropped by 1 + 16 per side
SVD_VALUES = 25  # f3 takes 25 singular values per level: the coarsest level needs 25 5x5 blocks


# --------------------------------------------------------------------------- parameter file


@dataclass(frozen=True)
class Forest:
    """One randomforest-matlab regression forest; every array is (nodes, trees), 1-based indices."""

    left: np.ndarray  # lDau: left daughter (0 at a leaf)
    right: np.ndarray  # rDau
    threshold: np.ndarray  # upper: go left when feature <= threshold
    value: np.ndarray  # avnode: the node's prediction
    feature: np.ndarray  # mbest: the split feature


def read_nrqm_mat(path: Path) -> tuple[np.ndarray, list[Forest]]:
    """(linear weights (4,), three forests) from NRQM_model.mat (`model.linear`, `model.rf{1..3}`).

    The forest structs are read by field position (lDau, rDau, -, -, upper, avnode, mbest), as
    pyiqa reads them.
    """
    import scipy.io

    try:
        model = scipy.io.loadmat(str(path))["model"]
        linear = np.asarray(model["linear"][0, 0], dtype=np.float64).ravel()
        cells = model["rf"][0, 0]
        forests = []
        for i in range(3):
            fields = cells[0, i][0, 0]
            left, right, threshold, value, feature = (np.asarray(fields[k]) for k in (0, 1, 4, 5, 6))
            forests.append(Forest(left.astype(np.int64), right.astype(np.int64), threshold.astype(np.float64),
                                  value.astype(np.float64), feature.astype(np.int64)))
    except FileNotFoundError:
        raise ParameterFileError(f"{path}: file not found") from None
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise ParameterFileError(f"{path}: not an NRQM model (model.linear, model.rf{{1..3}}): {e}") from None
    if linear.size != 4:
        raise ParameterFileError(f"{path}: model.linear has {linear.size} weights, expected 4")
    for f in forests:
        shapes = {a.shape for a in (f.left, f.right, f.threshold, f.value, f.feature)}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise ParameterFileError(f"{path}: forest arrays differ in shape: {sorted(shapes)}")
    return linear, forests


class ForestRegressor(torch.nn.Module):
    """Mean prediction of a forest's trees for a (B, F) feature batch, all trees walked together."""

    def __init__(self, forest: Forest) -> None:
        super().__init__()
        self.register_buffer("left", torch.from_numpy(forest.left - 1))  # 0-based; -1 at leaves
        self.register_buffer("right", torch.from_numpy(forest.right - 1))
        self.register_buffer("threshold", torch.from_numpy(forest.threshold))
        self.register_buffer("value", torch.from_numpy(forest.value))
        self.register_buffer("feature", torch.from_numpy(forest.feature - 1))
        self.depth = _max_depth(forest.left - 1, forest.right - 1)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        b, num_feats = feats.shape
        trees = self.left.shape[1]
        tree_idx = torch.arange(trees, device=feats.device).expand(b, trees)
        node = torch.zeros(b, trees, dtype=torch.long, device=feats.device)
        for _ in range(self.depth):
            # leaves point at feature 0 (index -1); their split is never followed
            split = self.feature[node, tree_idx].remainder(num_feats)
            go_left = feats.gather(1, split) <= self.threshold[node, tree_idx]
            child = torch.where(go_left, self.left[node, tree_idx], self.right[node, tree_idx])
            node = torch.where(child >= 0, child, node)
        return self.value[node, tree_idx].mean(dim=1)


def _max_depth(left: np.ndarray, right: np.ndarray) -> int:
    """Longest root-to-leaf path (number of splits) over all trees, walked level by level."""
    nodes = np.zeros(left.shape[1], dtype=np.int64)
    trees = np.arange(left.shape[1])
    depth = 0
    while True:
        children = np.concatenate([left[nodes, trees], right[nodes, trees]])
        trees = np.concatenate([trees, trees])[children >= 0]
        nodes = children[children >= 0]
        if not nodes.size:
            return depth
        depth += 1
        if depth > left.shape[0]:
            raise ParameterFileError("NRQM forest: a tree deeper than its node count (a cycle)")


# --------------------------------------------------------------------------- shared statistics


def _ggd_table() -> tuple[torch.Tensor, torch.Tensor]:
    """pyiqa's GGD shape grid (0.03:0.001:10, made in float32) and its ratio table, ascending."""
    shapes = torch.arange(0.03, 10 + 0.001, 0.001, dtype=torch.float32).to(torch.float64)
    ratio = torch.exp(torch.lgamma(1 / shapes) + torch.lgamma(3 / shapes) - 2 * torch.lgamma(2 / shapes))
    # the ratio falls as the shape grows: flip both so the ratio ascends for searchsorted
    return shapes.flip(0).contiguous(), ratio.flip(0).contiguous()


def ggd_shape(x: torch.Tensor, shapes: torch.Tensor, ratios: torch.Tensor) -> torch.Tensor:
    """Generalised-Gaussian shape of each row of x (..., n): the grid point whose moment ratio
    var / E|x - mean|^2 is nearest (ties to the smaller shape, as pyiqa's argmin)."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1)
    mean_abs = (x - mean).abs().mean(dim=-1) ** 2
    rho = (var / (mean_abs + 1e-7)).contiguous()
    n = ratios.numel()
    hi = torch.searchsorted(ratios, rho).clamp(1, n - 1)
    lo = hi - 1
    # in the ascending table the smaller shape is the higher index: it wins ties
    pick = torch.where((ratios[hi] - rho).abs() <= (rho - ratios[lo]).abs(), hi, lo)
    return shapes[pick]


def _coefficient_of_variation(x: torch.Tensor, eps: float) -> torch.Tensor:
    a = x.abs()
    return a.std(dim=-1) / (a.mean(dim=-1) + eps)


# --------------------------------------------------------------------------- f1: block DCT


def _dct_matrix(n: int) -> torch.Tensor:
    k = np.arange(n)[:, None]
    i = np.arange(n)[None, :]
    d = np.sqrt(2.0 / n) * np.cos(np.pi * (2 * i + 1) * k / (2 * n))
    d[0] /= np.sqrt(2.0)
    return torch.from_numpy(d)


def _orientation_index() -> torch.Tensor:
    """(3, 16) positions (row * 7 + col) of the three oriented DCT coefficient groups."""
    groups = [
        [(0, c) for c in range(1, 7)] + [(1, c) for c in range(2, 7)] + [(2, c) for c in range(4, 7)]
        + [(3, c) for c in range(5, 7)],
        [(1, 1)] + [(2, c) for c in range(2, 4)] + [(3, c) for c in range(2, 5)] + [(4, c) for c in range(3, 7)]
        + [(5, c) for c in range(4, 7)] + [(6, c) for c in range(4, 7)],
        [(r, 0) for r in range(1, 7)] + [(r, 1) for r in range(2, 7)] + [(r, 2) for r in range(4, 7)]
        + [(r, 3) for r in range(5, 7)],
    ]
    return torch.tensor([[r * 7 + c for r, c in g] for g in groups])


def block_dct_features(img: torch.Tensor, dct: torch.Tensor, orient: torch.Tensor, shapes, ratios) -> torch.Tensor:
    """(B, 1, h, w) level of the pyramid ([0, 1] scale) -> (B, 6) pooled block-DCT statistics."""
    b, _, h, w = img.shape
    # 'same' padding for 7x7 windows at stride 3, split as TensorFlow does (extra at the end)
    pad_h = (math.ceil(h / 3) - 1) * 3 + 7 - h
    pad_w = (math.ceil(w / 3) - 1) * 3 + 7 - w
    img = F.pad(img, (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2))
    blocks = F.unfold(img, 7, stride=3).transpose(1, 2).reshape(b, -1, 7, 7)
    coeffs = (dct @ blocks @ dct.T).flatten(-2)  # (B, P, 49)
    ac = coeffs[..., 1:]
    count = coeffs.shape[1]
    head = math.ceil(0.1 * count) + 1
    tail = math.floor(0.9 * count)

    shape = ggd_shape(ac, shapes, ratios).sort(dim=-1).values
    cv = _coefficient_of_variation(ac, 1e-7).sort(dim=-1).values
    oriented = _coefficient_of_variation(coeffs[..., orient], 1e-8)  # (B, P, 3)
    spread = oriented.var(dim=-1).sort(dim=-1).values
    return torch.stack([
        shape[:, :head].mean(dim=1), shape.mean(dim=1),
        cv[:, tail:].mean(dim=1), cv.mean(dim=1),
        spread[:, tail:].mean(dim=1), spread.mean(dim=1),
    ], dim=1)


# --------------------------------------------------------------------------- f2: steerable pyramid


def _raised_cosine() -> tuple[np.ndarray, np.ndarray]:
    """The log-radial transition (position -0.5, width 1 octave) of the steerable pyramid."""
    n = 256
    x = np.pi * np.arange(-n - 1, 2) / 2 / n
    y = np.cos(x) ** 2
    y[0], y[n + 2] = y[1], y[n + 1]
    return -0.5 + 2 / np.pi * (x + np.pi / 4), np.sqrt(y)


def _polar_grid(m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """log2 radius and angle of the centred frequency grid of an m x n image."""
    rows = np.linspace(-(m // 2) / (m / 2), (m // 2) / (m / 2) - (1 - m % 2) * 2 / m, num=m)
    cols = np.linspace(-(n // 2) / (n / 2), (n // 2) / (n / 2) - (1 - n % 2) * 2 / n, num=n)
    xv, yv = np.meshgrid(cols, rows)
    angle = np.arctan2(yv, xv)
    rad = np.sqrt(xv**2 + yv**2)
    rad[m // 2, n // 2] = rad[m // 2, n // 2 - 1]
    return np.log2(rad), angle


def _f32(a: np.ndarray) -> np.ndarray:
    """pyiqa keeps every pyramid mask in float32."""
    return a.astype(np.float32).astype(np.float64)


@lru_cache(maxsize=8)
def _pyramid_masks(h: int, w: int) -> dict:
    """Frequency masks of a 2-scale, 6-orientation complex steerable pyramid for an h x w image."""
    log_rad, angle = _polar_grid(h, w)
    x_rcos, y_rcos = _raised_cosine()
    yi_rcos = np.sqrt(1 - y_rcos**2)
    masks = {"high": _f32(np.interp(log_rad, x_rcos, y_rcos)), "low": _f32(np.interp(log_rad, x_rcos, yi_rcos))}

    lut = 1024
    x_cosn = np.pi * np.arange(-(2 * lut + 1), lut + 2) / lut
    alpha = (x_cosn + np.pi) % (2 * np.pi) - np.pi
    order = NUM_BANDS - 1
    const = 2 ** (2 * order) * math.factorial(order) ** 2 / (NUM_BANDS * math.factorial(2 * order))
    y_cosn = 2 * np.sqrt(const) * np.cos(x_cosn) ** order * (np.abs(alpha) < np.pi / 2)

    def oriented(log_rad, angle, x_rcos):
        radial = _f32(np.interp(log_rad, x_rcos, y_rcos))
        return np.stack([_f32(np.interp(angle, x_cosn + np.pi * b / NUM_BANDS, y_cosn)) * radial
                         for b in range(NUM_BANDS)])

    x_rcos = x_rcos - 1
    masks["bands0"] = oriented(log_rad, angle, x_rcos)
    # the next scale keeps the central (low-frequency) half of the spectrum
    dims = np.array([h, w])
    start = (np.ceil((dims + 0.5) / 2) - np.ceil((np.ceil((dims - 0.5) / 2) + 0.5) / 2)).astype(int)
    stop = (start + np.ceil((dims - 0.5) / 2)).astype(int)
    log_rad = log_rad[start[0] : stop[0], start[1] : stop[1]]
    angle = angle[start[0] : stop[0], start[1] : stop[1]]
    masks["crop"] = (start[0], stop[0], start[1], stop[1])
    masks["low1"] = _f32(np.interp(log_rad, x_rcos, yi_rcos))
    masks["bands1"] = oriented(log_rad, angle, x_rcos - 1)
    return masks


@lru_cache(maxsize=16)
def _pyramid_masks_on(h: int, w: int, device: torch.device) -> dict:
    return {k: torch.from_numpy(v).to(device) if isinstance(v, np.ndarray) else v
            for k, v in _pyramid_masks(h, w).items()}


def steerable_pyramid(img: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(B, H, W) -> high-pass residual (B, H, W) and the real parts of the oriented bands at two
    scales, (B, 6, H, W) and (B, 6, ~H/2, ~W/2)."""
    masks = _pyramid_masks_on(*img.shape[-2:], img.device)
    spectrum = torch.fft.fftshift(torch.fft.fft2(img), dim=(-2, -1))
    high = torch.fft.ifft2(torch.fft.ifftshift(spectrum * masks["high"], dim=(-2, -1))).real
    low = spectrum * masks["low"]
    bands = []
    for level in range(2):
        if level == 1:
            r0, r1, c0, c1 = masks["crop"]
            low = low[..., r0:r1, c0:c1] * masks["low1"]
        oriented = low.unsqueeze(1) * masks[f"bands{level}"]
        # the bands' complex factor is (-i)^5 = -i, and the real part of -i z is Im(z)
        bands.append(torch.fft.ifft2(torch.fft.ifftshift(oriented, dim=(-2, -1))).imag)
    return high, bands


def divisive_normalization(bands: Sequence[torch.Tensor], parents_up: torch.Tensor) -> list[torch.Tensor]:
    """Each band divided by its local GSM multiplier estimate (Gaussian scale mixture model).

    bands: (B, 6, H, W) and (B, 6, h, w) real parts; parents_up: the coarse bands resized to
    (H, W). The neighbourhood of a coefficient is its 3x3 window, its parent (fine scale only)
    and the same position in the other orientations; the multiplier is
    sqrt(v^T C^-1 v / N) with C the neighbourhood's second-moment matrix (negative eigenvalues
    clipped, trace kept) and N the 3x3 (+ parent) count. Returns 12 (B, h', w') bands, cropped
    by 1 + 16 (fine) or 1 + 8 (coarse) pixels per side and centred.
    """
    out = []
    for scale, level in enumerate(bands):
        b, nb, h, w = level.shape
        inner = level[..., 1:-1, 1:-1].reshape(b, nb, -1)  # (B, 6, hw)
        for band in range(nb):
            parts = [F.unfold(level[:, band : band + 1], 3)]  # (B, 9, hw)
            count = 9
            if scale == 0:
                parts.append(parents_up[:, band, 1:-1, 1:-1].reshape(b, 1, -1))
                count += 1
            parts.append(inner[:, [o for o in range(nb) if o != band]])
            hood = torch.cat(parts, dim=1)  # (B, d, hw)
            cov = hood @ hood.transpose(1, 2) / hood.shape[-1]
            evals, evecs = torch.linalg.eigh(cov)
            positive = evals * (evals > 0)
            pos_sum = positive.sum(dim=1, keepdim=True)
            evals = positive * evals.sum(dim=1, keepdim=True) / (pos_sum + (pos_sum == 0).to(evals.dtype))
            cov = evecs @ torch.diag_embed(evals) @ evecs.transpose(1, 2)
            quad = ((torch.linalg.inv(cov) @ hood) * hood).sum(dim=1) / count
            z = quad.sqrt()
            centre = inner[:, band] - inner[:, band].mean(dim=1, keepdim=True)
            nonzero = z != 0
            g = (centre * nonzero / (z * nonzero + 1e-12)).reshape(b, h - 2, w - 2)
            guard = 16 >> scale
            g = g[:, guard:-guard, guard:-guard]
            out.append(g - g.mean(dim=(1, 2), keepdim=True))
    return out


def gauss_filter_valid(x: torch.Tensor, taps: Sequence[float]) -> torch.Tensor:
    """'valid' correlation of (..., H, W) with the separable window outer(taps, taps).

    Shifted slices summed in place: several times faster than float64 conv2d on CPU.
    """
    k = len(taps)
    h, w = x.shape[-2:]
    rows = x[..., : h - k + 1, :] * taps[0]
    for i in range(1, k):
        rows.add_(x[..., i : h - k + 1 + i, :], alpha=taps[i])
    out = rows[..., : w - k + 1] * taps[0]
    for i in range(1, k):
        out.add_(rows[..., i : w - k + 1 + i], alpha=taps[i])
    return out


def _mean_and_variance(x: torch.Tensor, taps: Sequence[float]) -> tuple[torch.Tensor, torch.Tensor]:
    mu = gauss_filter_valid(x, taps)
    return mu, gauss_filter_valid(x * x, taps) - mu * mu


def _mean_cs(mu_x, var_x, mu_y, var_y, mean_xy) -> torch.Tensor:
    """Mean SSIM contrast-structure map (clipped at 0, data range 255) from local moments."""
    cov = mean_xy - mu_x * mu_y
    return F.relu((2 * cov + SSIM_C2) / (var_x + var_y + SSIM_C2)).mean(dim=(-2, -1))


def gsm_features(img: torch.Tensor, shapes, ratios, ssim_taps: Sequence[float]) -> torch.Tensor:
    """(B, H, W) luminance 0-255 -> (B, 45) steerable-pyramid features."""
    high, (fine, coarse) = steerable_pyramid(img)
    b, _, h, w = fine.shape
    # the coarse bands upsampled to the fine size (bicubic, as MATLAB imresize)
    coarse_up = matlab.imresize(coarse, size=(h, w))
    normalized = divisive_normalization([fine, coarse], coarse_up)

    feats = [ggd_shape(band.reshape(b, -1), shapes, ratios) for band in normalized]
    for o in range(NUM_BANDS):
        both = torch.cat([normalized[o].reshape(b, -1), normalized[o + NUM_BANDS].reshape(b, -1)], dim=1)
        feats.append(ggd_shape(both, shapes, ratios))
    # SSIM contrast-structure (11x11 Gaussian window, sigma 1.5, 'valid'): each band against the
    # high-pass residual, and each pair of fine normalised orientations
    bands = torch.cat([fine, coarse_up], dim=1)  # (B, 12, H, W)
    residual = high.unsqueeze(1)
    across_scales = _mean_cs(*_mean_and_variance(bands, ssim_taps), *_mean_and_variance(residual, ssim_taps),
                             gauss_filter_valid(bands * residual, ssim_taps))
    fine_norm = torch.stack(normalized[:NUM_BANDS], dim=1)
    i, j = torch.triu_indices(NUM_BANDS, NUM_BANDS, offset=1, device=img.device)
    mu, var = _mean_and_variance(fine_norm, ssim_taps)
    across_orientations = _mean_cs(mu[:, i], var[:, i], mu[:, j], var[:, j],
                                   gauss_filter_valid(fine_norm[:, i] * fine_norm[:, j], ssim_taps))
    return torch.cat([torch.stack(feats, dim=1), across_scales, across_orientations], dim=1)


# --------------------------------------------------------------------------- the metric


def gauss_pyramid(img: torch.Tensor, kernel: torch.Tensor) -> list[torch.Tensor]:
    """(B, 1, H, W) -> the image and two levels: 3x3 Gaussian (sigma 0.5, zero padding), every
    second pixel from the second."""
    levels = [img]
    for _ in range(2):
        img = matlab.conv2d(F.pad(img, (1, 1, 1, 1)), kernel.view(1, 1, 3, 3))[..., 1::2, 1::2]
        levels.append(img)
    return levels


def singular_value_features(level: torch.Tensor) -> torch.Tensor:
    """(B, 1, h, w) -> (B, 25) singular values of the matrix of its 5x5 distinct blocks (zero
    padded at the bottom and right)."""
    h, w = level.shape[-2:]
    level = F.pad(level, (0, -w % 5, 0, -h % 5))
    blocks = F.unfold(level, 5, stride=5).transpose(1, 2)  # (B, blocks, 25)
    return torch.linalg.svdvals(blocks)


class NRQM(torch.nn.Module):
    """forward(Bx3xHxW in [0, 1]) -> B NRQM scores (higher is better), float64."""

    def __init__(self, linear: np.ndarray, forests: Sequence[Forest], mode: str = "pyiqa") -> None:
        super().__init__()
        if mode not in ("pyiqa", "official"):
            raise ValueError(f"nrqm: mode must be 'pyiqa' or 'official', got {mode!r}")
        self.mode = mode
        self.register_buffer("linear", torch.from_numpy(np.asarray(linear, dtype=np.float64)))
        self.forests = torch.nn.ModuleList(ForestRegressor(f) for f in forests)
        shapes, ratios = _ggd_table()
        self.register_buffer("ggd_shapes", shapes, persistent=False)
        self.register_buffer("ggd_ratios", ratios, persistent=False)
        self.register_buffer("dct", _dct_matrix(7), persistent=False)
        self.register_buffer("orient", _orientation_index(), persistent=False)
        # pyiqa's fspecial kernels are stored in float32
        self.register_buffer("pyramid_kernel", matlab.fspecial_gaussian(3, 0.5, float32=True), persistent=False)
        self.ssim_taps = tuple(matlab.gaussian_1d(11, 1.5).tolist())

    def luminance(self, x: torch.Tensor) -> torch.Tensor:
        """Bx3xHxW [0, 1] -> Bx1xHxW float64 luminance on 0-255 (rounded as the mode's original)."""
        if self.mode == "pyiqa":
            return matlab.pyiqa_y_channel(x, "yiq")
        return matlab.rgb2gray(matlab.from_unit_float(x), uint8=True)

    def features(self, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Bx1xHxW luminance (0-255) -> the three feature groups (B, 18), (B, 45), (B, 75)."""
        h, w = y.shape[-2:]
        coarse_blocks = math.ceil((h // 4) / 5) * math.ceil((w // 4) / 5)
        if min(h, w) < MIN_SIDE or coarse_blocks < SVD_VALUES:
            # pyiqa fails on these too (too small a window, or fewer than 75 features for the forest)
            raise ValueError(
                f"NRQM needs at least {MIN_SIDE} pixels a side and {SVD_VALUES} 5x5 blocks in the quarter-size "
                f"image (84x84 will do), got {w}x{h} (width x height)"
            )
        y = y.to(torch.float64)
        levels = gauss_pyramid(y / 255, self.pyramid_kernel)
        args = (self.dct, self.orient, self.ggd_shapes, self.ggd_ratios)
        f1 = torch.cat([block_dct_features(level, *args) for level in levels], dim=1)
        f2 = gsm_features(y[:, 0], self.ggd_shapes, self.ggd_ratios, self.ssim_taps)
        f3 = torch.cat([singular_value_features(level) for level in levels], dim=1)
        return f1, f2, f3

    def score_luminance(self, y: torch.Tensor) -> torch.Tensor:
        """NRQM of Bx1xHxW luminance (0-255)."""
        preds = [forest(f) for forest, f in zip(self.forests, self.features(y), strict=True)]
        design = torch.stack([torch.ones_like(preds[0]), *preds], dim=1)
        return design @ self.linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Scores (B,); `last_flat_share` (B,): each image's share of flat (or exact-ramp) 7x7
        luminance windows (`repair.leftover_share`)."""
        y = self.luminance(x)
        self.last_flat_share = repair.leftover_share(y[:, 0])
        return self.score_luminance(y)


def build(files: Mapping[str, Path], mode: str = "pyiqa") -> NRQM:
    """The native NRQM module from the original `NRQM_model.mat` (table name NRQM_model.mat)."""
    if mode not in ("pyiqa", "official"):
        raise ValueError(f"nrqm: mode must be 'pyiqa' or 'official', got {mode!r}")
    linear, forests = read_nrqm_mat(files[PARAM_FILE])
    return NRQM(linear, forests, mode)
