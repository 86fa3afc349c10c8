"""BRISQUE (Mittal, Moorthy and Bovik 2012), batched.

At two scales (the second a MATLAB bicubic half) the MSCN coefficients of the luminance give a
GGD fit and four AGGD fits of neighbour products: 36 features, scaled by the LIVE svm-scale
ranges (`allrange`) and scored by the LIVE RBF epsilon-SVR (`allmodel`), both read directly.

mode "pyiqa": pyiqa 0.1.16, in float32 where pyiqa works in float32 (luminance, MSCN, paired
products, half-size resize, row sums of the moments: memory-bound passes, twice as fast as in
float64); the totals of the row sums, the fits and the SVR in float64. The YIQ luminance is
rounded exactly as pyiqa does it; the 7x7 Gaussian runs as two symmetric 1-D passes of shifted
slices and the MATLAB bicubic half as 8 strided slices (a one-channel conv2d is several times
slower on CPU). Where a window is flat (or an exact ramp) the MSCN coefficient is a rounding
leftover whose sign the AGGD fits count (a large flat area moves the score by tens of per cent:
BENCHMARKS.md, "Flat areas"):
there, and only there, the coefficient is computed with pyiqa's own float32 conv2d arithmetic
(`repair.repair_leftovers`; every grey level: tests/metrics/native/test_native_flat.py). On GPUs the whole
filtering is pyiqa's 2-D conv2d, one image a call. pyiqa's float32 rounding (mostly in the SVR sum) moves its
own score by a few 1e-3 absolute with the batch it sits in, so scores differ by ~1e-4 to 1e-3
relative, and by up to ~1e-2 absolute near zero (I04.bmp: pyiqa -0.1152, here -0.1069, pyiqa
run in float64 -0.1073).

mode "official": LIVE's `brisquescore.m` on the uint8 image (MATLAB rgb2gray, rounded),
including its text round trip through svm-scale and svm-predict: features written with `%f`,
scaled features with `%g`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from banana100.metrics.native import matlab, nss, repair
from banana100.metrics.native.params import read_libsvm_model, read_libsvm_range

MODEL_FILE = "brisque_live_allmodel"
RANGE_FILE = "brisque_live_allrange"
MIN_SIZE = 7
FLOAT32_EPS = float(torch.finfo(torch.float32).eps)


def aggd_features(ggd_alpha, ggd_mean_sq, alpha, left, right) -> torch.Tensor:
    """The 18 features of one scale from the GGD fit (B,) and the four AGGD fits (B, 4)."""
    eta = (right - left) * torch.exp(
        torch.lgamma(2 / alpha)
        - (torch.lgamma(1 / alpha) + torch.lgamma(3 / alpha)) / 2
    )
    pairs = torch.stack([alpha, eta, left * left, right * right], dim=-1).flatten(-2)
    return torch.cat([ggd_alpha.unsqueeze(-1), ggd_mean_sq.unsqueeze(-1), pairs], dim=-1)


def scale_features(x: torch.Tensor) -> torch.Tensor:
    """The 18 LIVE BRISQUE features of MSCN images (B, H, W) -> (B, 18)."""
    alpha, mean_sq = nss.estimate_ggd(x.flatten(-2))
    pairs = nss.paired_products(x, nss.BRISQUE_SHIFTS).flatten(-2)  # (B, 4, H*W)
    return aggd_features(alpha, mean_sq, *nss.estimate_aggd(pairs))


def round_decimals(x: torch.Tensor, decimals: int) -> torch.Tensor:
    """What printf("%.{decimals}f") then strtod gives."""
    return torch.round(x * 10.0**decimals) / 10.0**decimals


def round_significant(x: torch.Tensor, digits: int = 6) -> torch.Tensor:
    """What printf("%g") (6 significant digits) then strtod gives."""
    safe = torch.where(x == 0, torch.ones_like(x), x.abs())
    step = 10.0 ** (torch.floor(torch.log10(safe)) - (digits - 1))
    rounded = torch.round(x / step) * step
    return torch.where(x == 0, x, rounded)


class BRISQUE(nss.ChunkedScoring):
    """forward(Bx3xHxW float32 in [0, 1]) -> B float64 BRISQUE scores (lower is better);
    `last_flat_share` (B,) then holds each image's share of full-scale windows where the MSCN
    coefficient is a rounding leftover."""

    def __init__(self, model, ranges, mode: str):
        super().__init__()
        self.mode = mode
        self.gamma = float(model.gamma)
        self.rho = float(model.rho)
        self.lower, self.upper = float(ranges.lower), float(ranges.upper)
        n_features = ranges.feature_min.size
        if model.support_vectors.shape[1] > n_features:
            raise ValueError(
                f"brisque: the model has {model.support_vectors.shape[1]} features, the ranges {n_features}"
            )
        sv = torch.zeros(
            model.support_vectors.shape[0], n_features, dtype=torch.float64
        )
        sv[:, : model.support_vectors.shape[1]] = torch.from_numpy(
            model.support_vectors
        )
        self.register_buffer("support_vectors", sv)
        self.register_buffer("coef", torch.from_numpy(model.coef).to(torch.float64))
        self.register_buffer(
            "feature_min", torch.from_numpy(ranges.feature_min).to(torch.float64)
        )
        self.register_buffer(
            "feature_max", torch.from_numpy(ranges.feature_max).to(torch.float64)
        )
        # pyiqa mode's float32 passes run best on about one 512x512 image at a time (cache-sized)
        self.chunk_pixels = 1 << 18 if mode == "pyiqa" else 1 << 21
        if mode == "pyiqa":
            # the 1-D factor of pyiqa's 7x7 window (float32-rounded there: ~1e-7 relative apart)
            self.register_buffer("window", matlab.gaussian_1d(7, 7 / 6))
            # pyiqa's float32 window sums to 1 + 1.1e-8: a flat area of value v keeps a residue
            # -excess * v after the local mean is taken off, and the neighbour products there are
            # positive, not zero; the AGGD fits count them (BENCHMARKS.md, "Flat areas": by how much)
            self.window_excess = float(matlab.fspecial_gaussian(7, 7 / 6, float32=True).sum() - 1)
            self.register_buffer("window_2d", matlab.fspecial_gaussian(7, 7 / 6, float32=True))
        else:
            # brisque_feature.m normalises fspecial's window again
            window = matlab.fspecial_gaussian(7, 7 / 6)
            self.register_buffer("window", window / window.sum())

    def luminance(self, x: torch.Tensor) -> torch.Tensor:
        """Bx3xHxW [0, 1] -> BxHxW luminance on 0-255, rounded as the mode's original (float64)."""
        if self.mode == "pyiqa":
            return matlab.pyiqa_y_channel(x, "yiq").squeeze(-3)
        return matlab.rgb2gray(matlab.from_unit_float(x), uint8=True).squeeze(-3)

    def features(self, y: torch.Tensor) -> torch.Tensor:
        """BxHxW luminance -> (B, 36) float64 features."""
        h, w = y.shape[-2:]
        if h < MIN_SIZE or w < MIN_SIZE:
            raise ValueError(
                f"BRISQUE needs at least {MIN_SIZE}x{MIN_SIZE} pixels, got {w}x{h} (width x height)"
            )
        if self.mode == "pyiqa":
            return self.features_float32(y.to(torch.float32))
        per_scale = []
        for scale in (1, 2):
            filtering = "exact_uint8" if scale == 1 else "near_separable"
            structdis, centred = nss.mscn(y, self.window, "zeros", filtering=filtering, with_centred=True)
            if scale == 1:  # the flat share, from this filtering's x - mu (no second pass)
                self._share = repair.centred_share(centred)
            per_scale.append(scale_features(structdis))
            if scale == 1:
                y = matlab.imresize(y, scale=0.5)
        return torch.cat(per_scale, dim=-1)

    def features_float32(self, y: torch.Tensor) -> torch.Tensor:
        """pyiqa's features of BxHxW float32 luminance, in float32 as pyiqa, sums in float64."""
        per_scale = []
        for scale in (1, 2):
            if scale == 2:
                y = matlab.imresize_half(y)
            structdis = self.mscn_float32(y, full_scale=scale == 1)
            n = structdis.shape[-2] * structdis.shape[-1]
            alpha, mean_sq = nss.ggd_from_moments(nss.signed_moments_rows(structdis), n)
            pairs = nss.signed_moments_rows(nss.paired_products(structdis, nss.BRISQUE_SHIFTS))
            per_scale.append(aggd_features(alpha, mean_sq, *nss.aggd_from_moments(pairs, n)))
        return torch.cat(per_scale, dim=-1)

    def mscn_float32(self, y: torch.Tensor, full_scale: bool = True) -> torch.Tensor:
        """pyiqa's MSCN coefficients of BxHxW float32 luminance (its `normalize_img_with_gauss`).

        Fast separable filtering, except where a coefficient is a rounding leftover (flat
        windows, exact ramps): there pyiqa's own float32 convolution, so the signs agree.
        `full_scale`: y is the full-scale luminance (0..255 integers), whose flat share the
        forward reports (left in `_share`).
        """
        if y.device.type != "cpu":
            # pyiqa's own 2-D float32 convolution: on GPUs it is fast, and only it rounds
            # (TF32 included, where enabled) as pyiqa's does on the same device; one image a
            # call, as pyiqa scores them (the algorithm chosen can depend on the batch)
            structdis = torch.cat([nss.mscn(one, self.window_2d, "zeros", sigma_eps=FLOAT32_EPS)
                                   for one in y.split(1)])
        else:
            mu, mean_sq = matlab.imfilter_moments_separable(y, self.window, "zeros")
            # pyiqa's safe_sqrt adds the float32 eps
            sigma = mean_sq.addcmul_(mu, mu, value=-1).abs_().add_(FLOAT32_EPS).sqrt_().add_(1)
            centred = torch.sub(y, mu, out=mu).sub_(y, alpha=self.window_excess)
            structdis = torch.div(centred, sigma, out=sigma)
            # flat windows and exact ramps: pyiqa's own leftovers (their signs are counted)
            # the full scale holds integers: its flat windows take pyiqa's value per grey level
            share = repair.repair_leftovers(structdis, y, centred, self.window_2d, "zeros", integers=full_scale)
            if full_scale:
                self._share = share
        if full_scale and y.device.type != "cpu":
            self._share = repair.leftover_share(y, padding="zeros")
        return structdis

    def scale(self, feats: torch.Tensor) -> torch.Tensor:
        """svm-scale: [min, max] -> [lower, upper] per feature (features with min == max are dropped, i.e. 0)."""
        span = self.feature_max - self.feature_min
        scaled = (
            self.lower + (self.upper - self.lower) * (feats - self.feature_min) / span
        )
        scaled = torch.where(
            feats == self.feature_min, torch.full_like(scaled, self.lower), scaled
        )
        scaled = torch.where(
            feats == self.feature_max, torch.full_like(scaled, self.upper), scaled
        )
        return torch.where(span == 0, torch.zeros_like(scaled), scaled)

    def score(self, x: torch.Tensor) -> torch.Tensor:
        """Scores of a batch, in one pass."""
        feats = self.features(self.luminance(x))
        if self.mode == "official":
            # brisquescore.m writes the features with %f; svm-scale writes its output with %g
            scaled = round_significant(self.scale(round_decimals(feats, 6)))
        else:
            scaled = self.scale(feats)
        dist = (
            (scaled.unsqueeze(-2) - self.support_vectors).pow(2).sum(dim=-1)
        )  # (B, n_sv)
        return torch.exp(-self.gamma * dist) @ self.coef - self.rho


def build(files: Mapping[str, Path], mode: str = "pyiqa") -> BRISQUE:
    """The native BRISQUE module from the LIVE LIBSVM files (table names brisque_live_allmodel / _allrange)."""
    if mode not in ("pyiqa", "official"):
        raise ValueError(f"brisque: mode must be 'pyiqa' or 'official', got {mode!r}")
    return BRISQUE(
        read_libsvm_model(files[MODEL_FILE]), read_libsvm_range(files[RANGE_FILE]), mode
    )
