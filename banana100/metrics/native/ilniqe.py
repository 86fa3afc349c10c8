"""Native IL-NIQE (Zhang, Zhang & Bovik, "A Feature-Enriched Completely Blind Image Quality
Evaluator", IEEE TIP 2015), batched over images and vectorised over patches.

The image is resized to 524x524 and cropped to 504x504 (6x6 patches of 84 px); at two scales each
patch gets 234 features: AGGD fits of the MSCN map and its neighbour products, Weibull fits of
gradient magnitudes, mean/variance of log-opponent colour channels, AGGD fits of gradients and of
12 log-Gabor responses (FFT filtering) and their gradients, Weibull fits of the latter's
magnitudes. The 468 features are projected with the template's PCA basis and each patch's
Bhattacharyya-like distance to the pristine Gaussian is averaged.

Modes:
- "pyiqa": pyiqa 0.1.16's port (of the official Python release): a float32 resize without uint8
  rounding (repeated operation for operation: it matters for small images), pyiqa's float32
  windows, colour weights and log-Gabor filters, sqrt(. + 1e-8) magnitudes, its Newton Weibull
  fit that stops once the largest update over all of an image's patches is below 0.01 (decided
  per image, so scores do not depend on the batch), features clipped at 1e4.
- "official": the MATLAB release (computequality.m): imresize of the uint8 image (rounded to
  uint8 after each 1-D pass, smaller scale first), exact maximum-likelihood Weibull (`wblfit`),
  only infinite features replaced by 1e4, NaN mean/covariance entries set to 2000.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.io
import torch

from banana100.metrics.native import matlab, repair
from banana100.metrics.native.matlab import pyiqa_imresize as _pyiqa_imresize

PARAM_FILE = "ILNIQE_templateModel.mat"

NORMALIZED_WIDTH = 524
BLOCK = 84
SIGMA_GAU_DERIVATIVE = 1.66
SCALE_FACTOR_GAU_DERIVATIVE = 0.28
K_FOR_LOG = 0.00001
MIN_WAVELENGTH = 2.4
SIGMA_ON_F = 0.55
MULT = 1.31
D_THETA_ON_SIGMA = 1.10
SCALE_FACTOR_LOG_GABOR = 0.87
SIGMA_DOWNSAMPLE = 0.9
N_GABOR_SCALES = 3
N_GABOR_ORIENTS = 4
INF_CONST = 10000.0
NAN_CONST = 2000.0
PYIQA_EPS = 1e-8  # pyiqa: sqrt(Ix^2 + Iy^2 + 1e-8); MATLAB: sqrt(Ix^2 + Iy^2) + eps
# elements of the temporaries made at once (4 MiB of float64): small blocks are reused by the
# allocator, large ones are paged in anew each time, which costs more than the arithmetic
CHUNK_ELEMENTS = 1 << 19
OPPONENT = ((0.3, 0.04, -0.35), (0.34, -0.6, 0.17), (0.06, 0.63, 0.27))


def build(files: Mapping[str, Path], mode: str = "pyiqa") -> torch.nn.Module:
    """The native IL-NIQE module reading `files["ILNIQE_templateModel.mat"]`."""
    if mode not in ("pyiqa", "official"):
        raise ValueError(f"ilniqe: mode must be 'pyiqa' or 'official', got {mode!r}")
    return ILNIQE(*load_template(Path(files[PARAM_FILE])), mode=mode)


def load_template(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mu, cov, meanOfSampleData, principleVectors) from the release's templateModel.mat."""
    try:
        cell = scipy.io.loadmat(str(path))["templateModel"]
        mu, cov, mean, vectors = (np.asarray(cell[0][i], dtype=np.float64) for i in range(4))
        mu, mean = mu.ravel(), mean.ravel()
        n = mu.size
        if cov.shape != (n, n) or vectors.shape != (mean.size, n):
            raise ValueError(
                f"inconsistent shapes mu {mu.shape}, cov {cov.shape}, mean {mean.shape}, vectors {vectors.shape}"
            )
    except (OSError, KeyError, IndexError, TypeError, ValueError, NotImplementedError) as e:
        raise ValueError(
            f"{path} is not an IL-NIQE template model (a 1x4 MATLAB cell 'templateModel': "
            f"mu, cov, meanOfSampleData, principleVectors): {e}"
        ) from e
    return mu, cov, mean, vectors


class ILNIQE(torch.nn.Module):
    """IL-NIQE scores (lower is better) of Bx3xHxW [0, 1] images."""

    def __init__(self, mu, cov, mean, vectors, mode: str = "pyiqa"):
        super().__init__()
        self.mode = mode
        self.pyiqa = mode == "pyiqa"
        for name, value in (("mu_pristine", mu), ("cov_pristine", cov), ("mean_sample", mean), ("principal_vectors", vectors)):
            self.register_buffer(name, torch.as_tensor(np.asarray(value), dtype=torch.float64))
        # pyiqa builds its colour weights and Gaussian windows in float32
        opponent = torch.tensor(OPPONENT, dtype=torch.float32 if self.pyiqa else torch.float64)
        self.register_buffer("opponent", opponent.to(torch.float64))
        # constants, kept as Python numbers: the filters use them as scalar weights
        self.mscn_window = matlab.fspecial_gaussian(5, 5 / 6, float32=self.pyiqa).tolist()
        size = math.ceil(6 * SIGMA_DOWNSAMPLE)
        self.downsample_window = matlab.fspecial_gaussian(size, SIGMA_DOWNSAMPLE, float32=self.pyiqa).tolist()
        # pyiqa's grid of AGGD shapes is a float32 arange; MATLAB's is 0.2:0.001:10 in double
        if self.pyiqa:
            shapes = torch.arange(0.2, 10 + 0.001, 0.001, dtype=torch.float32).to(torch.float64)
        else:
            shapes = 0.2 + 0.001 * torch.arange(9801, dtype=torch.float64)
        self.register_buffer("aggd_shapes", shapes)
        self.register_buffer("aggd_ratio", (2 * torch.lgamma(2 / shapes) - torch.lgamma(1 / shapes) - torch.lgamma(3 / shapes)).exp())
        self.register_buffer("aggd_beta_factor", (torch.lgamma(1 / shapes) - torch.lgamma(3 / shapes)).exp().sqrt())
        self.register_buffer("aggd_mean_factor", (torch.lgamma(2 / shapes) - torch.lgamma(1 / shapes)).exp())
        self._filters: dict = {}  # log-Gabor filters by (size, scale, device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"ilniqe expects a Bx3xHxW tensor, got shape {tuple(x.shape)}")
        if min(x.shape[-2:]) < 5:
            # the metric table's minimum: below it pyiqa raises (IndexError under 3 px) or its SVD may fail
            raise ValueError(f"ilniqe needs images of at least 5x5 pixels, got {x.shape[-1]}x{x.shape[-2]}")
        img = self._resized(x)
        n = (NORMALIZED_WIDTH // BLOCK) * BLOCK
        img = img[..., :n, :n]
        opponent = torch.einsum("oc,bchw->bohw", self.opponent, img)
        # the share of 5x5 MSCN windows of O3 (full scale) that are flat or exact ramps
        self.last_flat_share = repair.leftover_share(opponent[:, 2], 5, 5 / 6, "replicate")
        features = []
        for scale in (1, 2):
            features.append(self._scale_features(opponent, img, scale))
            if scale == 1:
                opponent = self._downsample(opponent)
                img = self._downsample(img)
        return self._quality(torch.cat(features, dim=-1))

    # ------------------------------------------------------------------ preprocessing

    def _resized(self, x: torch.Tensor) -> torch.Tensor:
        """The 0-255 image resized to 524x524, float64."""
        img = torch.round(x * 255.0).to(torch.float64)  # pyiqa rounds x*255 in the input's dtype
        size = (NORMALIZED_WIDTH, NORMALIZED_WIDTH)
        if self.pyiqa:
            return _pyiqa_imresize(img, size).clamp(0.0, 255.0)
        return matlab.imresize(img, size=size, uint8=True)

    def _downsample(self, t: torch.Tensor) -> torch.Tensor:
        """Gaussian blur (replicate borders) and keep every other pixel."""
        return filter2d(t, self.downsample_window, step=2)

    # ------------------------------------------------------------------ features

    def _scale_features(self, opponent: torch.Tensor, rgb: torch.Tensor, scale: int) -> torch.Tensor:
        """(B, patches, 234) features of one scale, in the release's order."""
        bs = BLOCK // scale
        o3 = opponent[:, 2:3]
        feats = [self._mscn_features(self._mscn(o3), bs)]

        sigma = SIGMA_GAU_DERIVATIVE / scale**SCALE_FACTOR_GAU_DERIVATIVE
        factors = _gaussian_derivatives(sigma, opponent.device)
        kernel_spectrum = _derivative_spectrum(factors, *o3.shape[-2:])
        # O1 + i O2 and O3: one complex map serves two real ones (the kernels are real)
        packed = torch.complex(opponent[:, [0, 2]], torch.cat((opponent[:, 1:2], torch.zeros_like(o3)), dim=1))
        grad = _conv2_same(packed, torch.fft.fft2(packed), kernel_spectrum, factors)  # (B, 2, 2, H, W): map, kernel
        gx = torch.stack((grad[:, 0, 0].real, grad[:, 0, 0].imag, grad[:, 1, 0].real), dim=1)
        gy = torch.stack((grad[:, 0, 1].real, grad[:, 0, 1].imag, grad[:, 1, 1].real), dim=1)
        del grad
        if self.pyiqa and opponent.device.type == "cpu":
            # on flat windows a derivative is a rounding leftover whose sign the AGGD fits count:
            # there, pyiqa's own float64 conv2d values (its 2-D kernels, its summation order)
            maps = opponent.reshape(-1, *opponent.shape[-2:])
            for g, kernel in zip((gx, gy), _pyiqa_derivative_kernels(sigma), strict=True):
                bound = repair.leftover_bound(kernel, torch.float64, 2 * 255.0) * float(kernel.abs().sum())
                repair.repair_filtered(g.view(-1, *g.shape[-2:]), maps, kernel, "zeros", bound)
        feats.append(self._weibull(_blocks(self._magnitude(gx, gy), bs)))

        log_rgb = torch.log(rgb + K_FOR_LOG)
        log_rgb = log_rgb - log_rgb.mean(dim=(-2, -1), keepdim=True)
        r, g, b = log_rgb.unbind(dim=1)
        colour = _blocks(torch.stack(((r + g + b) / math.sqrt(3), (r + g - 2 * b) / math.sqrt(6), (r - g) / math.sqrt(2)), dim=1), bs)
        feats.append(_interleave(colour.mean(dim=-1), colour.var(dim=-1)))
        feats.append(_interleave(*self._aggd_features(gx, bs), *self._aggd_features(gy, bs)))  # IxO1, IyO1, ...

        filters = self._log_gabor(*o3.shape[-2:], scale, o3.device)  # (12, H, W), scale-major
        o3_spectrum = torch.fft.fft2(o3)
        b, _, h, w = o3.shape
        n_filters = filters.shape[0]
        # gradient magnitudes of the real and imaginary responses, in patch layout for the Weibull fit
        magnitudes = o3.new_empty(b, 2 * n_filters, (h // bs) * (w // bs), bs * bs)
        responses, partials = [], []
        # a few filters at a time keeps the temporaries small (they are reused, not paged in anew)
        step = max(1, CHUNK_ELEMENTS // (b * h * w))
        for i in range(0, n_filters, step):
            spectrum = filters[i : i + step] * o3_spectrum
            response = torch.fft.ifft2(spectrum)
            responses.append(self._aggd_features(response.real, bs) + self._aggd_features(response.imag, bs))
            partial = _conv2_same(response, spectrum, kernel_spectrum, factors)
            px, py = partial[:, :, 0], partial[:, :, 1]
            partials.append(
                self._aggd_features(px.real, bs) + self._aggd_features(py.real, bs)
                + self._aggd_features(px.imag, bs) + self._aggd_features(py.imag, bs)
            )
            n = px.shape[1]
            magnitudes[:, i : i + n] = _blocks(self._magnitude(px.real, py.real), bs)
            magnitudes[:, n_filters + i : n_filters + i + n] = _blocks(self._magnitude(px.imag, py.imag), bs)
        feats.append(_interleave(*(torch.cat(f, dim=1) for f in zip(*responses, strict=True))))  # real, imag per filter
        feats.append(_interleave(*(torch.cat(f, dim=1) for f in zip(*partials, strict=True))))  # x-real, y-real, x-imag, y-imag
        weibull = self._weibull(magnitudes)  # (B, patches, 24, 2): real responses' filters, then imaginary
        feats.append(torch.stack((weibull[:, :, :n_filters], weibull[:, :, n_filters:]), dim=3))
        return torch.cat([f.flatten(2) for f in feats], dim=-1)

    def _log_gabor(self, rows: int, cols: int, scale: int, device) -> torch.Tensor:
        """The 12 log-Gabor filters of a scale, cached (the image is always 504 or 252 px square)."""
        key = (rows, cols, scale, str(device))
        if key not in self._filters:
            dtype = torch.float32 if self.pyiqa else torch.float64  # pyiqa builds them in float32
            wavelength = MIN_WAVELENGTH / scale**SCALE_FACTOR_LOG_GABOR
            self._filters[key] = _log_gabor_filters(rows, cols, wavelength, device, dtype).to(torch.float64)
        return self._filters[key]

    def _mscn(self, t: torch.Tensor) -> torch.Tensor:
        mu = filter2d(t, self.mscn_window)
        var = (filter2d(t * t, self.mscn_window) - mu * mu).abs()
        if self.pyiqa:
            var = var + torch.finfo(torch.float64).eps
        return (t - mu) / (var.sqrt() + 1)

    def _magnitude(self, gx: torch.Tensor, gy: torch.Tensor) -> torch.Tensor:
        if self.pyiqa:
            return torch.sqrt(gx * gx + gy * gy + PYIQA_EPS)
        return torch.sqrt(gx * gx + gy * gy) + torch.finfo(torch.float64).eps

    def _mscn_features(self, mscn: torch.Tensor, bs: int) -> torch.Tensor:
        """(B, patches, 18): AGGD of the MSCN patch, then of its products with 4 neighbours."""
        b, _, h, w = mscn.shape
        patches = mscn.reshape(b, h // bs, bs, w // bs, bs).permute(0, 1, 3, 2, 4).reshape(b, -1, bs, bs)
        alpha, left, right, _ = self._aggd(*_aggd_moments(patches, (-2, -1)))
        out = [alpha, (left + right) / 2]
        # circular shifts within each patch, as MATLAB's circshift on the block
        for shift in ((0, 1), (1, 0), (1, 1), (1, -1)):
            products = patches * torch.roll(patches, shift, dims=(-2, -1))
            alpha, left, right, idx = self._aggd(*_aggd_moments(products, (-2, -1)))
            out += [alpha, (right - left) * self.aggd_mean_factor[idx], left, right]
        return torch.stack(out, dim=-1)

    def _aggd_features(self, maps: torch.Tensor, bs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """AGGD shape and mean scale, each (B, C, patches), of the bs x bs patches of (B, C, H, W) maps."""
        b, c, h, w = maps.shape
        # a few maps at a time: small temporaries are reused by the allocator instead of paged in anew
        step = max(1, CHUNK_ELEMENTS // (b * h * w))
        moments = [
            _aggd_moments(maps[:, i : i + step].reshape(b, -1, h // bs, bs, w // bs, bs), (3, 5))
            for i in range(0, c, step)
        ]
        moments = [torch.cat(m, dim=1) if isinstance(m[0], torch.Tensor) else m[0] for m in zip(*moments, strict=True)]
        alpha, left, right, _ = self._aggd(*moments)
        return alpha.flatten(2), ((left + right) / 2).flatten(2)

    def _aggd(self, n_neg, n_pos, sq_neg, sq_pos, abs_sum, count):
        """AGGD (shape, left scale, right scale, grid index) from moments, by nearest ratio on the grid."""
        left_std = torch.sqrt(sq_neg / n_neg)
        right_std = torch.sqrt(sq_pos / n_pos)
        gammahat = left_std / right_std
        rhat = (abs_sum / count).pow(2) / ((sq_neg + sq_pos) / count)
        rhatnorm = rhat * (gammahat.pow(3) + 1) * (gammahat + 1) / (gammahat.pow(2) + 1).pow(2)
        idx = _nearest_index(self.aggd_ratio, rhatnorm)
        factor = self.aggd_beta_factor[idx]
        return self.aggd_shapes[idx], left_std * factor, right_std * factor, idx

    def _weibull(self, blocks: torch.Tensor) -> torch.Tensor:
        """(B, patches, C, 2): Weibull (scale, shape) of (B, C, patches, N) positive samples."""
        fit = _weibull_pyiqa if self.pyiqa else weibull_mle
        shape, scale = fit(blocks)
        return torch.stack((scale, shape), dim=-1).transpose(1, 2)

    # ------------------------------------------------------------------ pooling

    def _quality(self, features: torch.Tensor) -> torch.Tensor:
        """Mean distance of the PCA-projected patch features (B, patches, 468) to the pristine model."""
        if self.pyiqa:
            features = features.clamp(max=INF_CONST)  # keeps NaN, as pyiqa's masked assignment
        else:
            features = torch.where(torch.isinf(features), torch.full_like(features, INF_CONST), features)
        coeffs = (features - self.mean_sample) @ self.principal_vectors  # (B, patches, 430)
        nan = torch.isnan(coeffs)
        valid = (~nan).to(coeffs.dtype)
        mean = torch.where(nan, 0.0, coeffs).sum(1) / valid.sum(1)  # nanmean over patches
        complete = (~nan.any(-1, keepdim=True)).to(coeffs.dtype)  # nancov keeps complete rows
        rows = complete.sum(1, keepdim=True)
        centred = torch.where(complete.bool(), coeffs, 0.0)
        centred = (centred - centred.sum(1, keepdim=True) / rows) * complete
        dof = torch.where(rows > 1, rows - 1, rows)
        cov = centred.transpose(1, 2) @ centred / dof
        if not self.pyiqa:
            mean = torch.nan_to_num(mean, nan=NAN_CONST)
            cov = torch.nan_to_num(cov, nan=NAN_CONST)
        filled = torch.where(nan, mean.unsqueeze(1), coeffs)
        inv = torch.linalg.pinv((self.cov_pristine + cov) / 2, hermitian=True)
        diff = filled - self.mu_pristine
        dist = torch.sqrt(((diff @ inv) * diff).sum(-1))
        return dist.mean(dim=1)


# ---------------------------------------------------------------------- helpers


def _blocks(t: torch.Tensor, bs: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, C, patches, bs*bs), non-overlapping bs x bs patches."""
    b, c, h, w = t.shape
    return t.reshape(b, c, h // bs, bs, w // bs, bs).permute(0, 1, 2, 4, 3, 5).reshape(b, c, -1, bs * bs)


def _interleave(*features: torch.Tensor) -> torch.Tensor:
    """(B, C, patches) features -> (B, patches, C * len(features)), channel-major."""
    return torch.stack(features, dim=-1).transpose(1, 2).flatten(2)


def _aggd_moments(v: torch.Tensor, dims) -> tuple[torch.Tensor, ...]:
    """Counts of negative and positive samples, their sums of squares, sum of |v| and count over dims."""
    neg = v.clamp(max=0)
    n_neg = torch.count_nonzero(neg, dim=dims).to(v.dtype)
    n_pos = torch.count_nonzero(v, dim=dims).to(v.dtype) - n_neg
    sq_neg = (neg * neg).sum(dim=dims)
    sq_pos = (v * v).sum(dim=dims) - sq_neg
    abs_sum = v.sum(dim=dims) - 2 * neg.sum(dim=dims)
    count = v.numel() // n_neg.numel()
    return n_neg, n_pos, sq_neg, sq_pos, abs_sum, count


def filter2d(t: torch.Tensor, kernel: list[list[float]], step: int = 1) -> torch.Tensor:
    """MATLAB imfilter(t, kernel, 'replicate') of (B, C, H, W), keeping every `step`-th pixel.

    A sum of shifted copies: cheaper than a float64 conv2d (im2col) for these small kernels.
    """
    kh, kw = len(kernel), len(kernel[0])
    h, w = t.shape[-2:]
    top, left = (kh - 1) // 2, (kw - 1) // 2
    padded = torch.nn.functional.pad(t, (left, kw - 1 - left, top, kh - 1 - top), mode="replicate")
    out = padded[..., 0:h:step, 0:w:step] * kernel[0][0]
    for i in range(kh):
        for j in range(kw):
            if i or j:
                out.add_(padded[..., i : i + h : step, j : j + w : step], alpha=kernel[i][j])
    return out


def _nearest_index(table: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """argmin |table - value| for an increasing table (first index on ties, 0 for NaN and inf)."""
    flat = value.reshape(-1).contiguous()
    finite = torch.isfinite(flat)
    hi = torch.searchsorted(table, torch.where(finite, flat, 0.0)).clamp(1, table.numel() - 1)
    lo = hi - 1
    pick_lo = (flat - table[lo]).abs() <= (table[hi] - flat).abs()
    idx = torch.where(pick_lo, lo, hi)
    # every distance is NaN or inf there: argmin (and MATLAB's min) give the first entry
    idx = torch.where(finite, idx, torch.zeros_like(idx))
    return idx.reshape(value.shape)


def _gaussian_derivatives(sigma: float, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The release's gauDerivative, x * exp(-(x^2+y^2) / (2 sigma^2)) and its transpose, as 1-D factors:
    (gaussian, x * gaussian), so dx = outer(gaussian, x * gaussian) and dy = outer(x * gaussian, gaussian)."""
    half = math.ceil(3 * sigma)
    t = torch.linspace(-half, half, 2 * half + 1, dtype=torch.float64, device=device)
    g = torch.exp(-(t**2) / 2 / sigma / sigma)
    return g, t * g


def _pyiqa_derivative_kernels(sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
    """pyiqa's gauDerivative kernels (2-D, as it computes them: not the outer product of the 1-D
    factors, which rounds differently), flipped for correlation as its conv2d does; float64, CPU."""
    half = math.ceil(3 * sigma)
    x, y = np.meshgrid(np.linspace(-half, half, 2 * half + 1), np.linspace(-half, half, 2 * half + 1))
    gauss = np.exp(-(x**2 + y**2) / 2 / sigma / sigma)
    return tuple(torch.from_numpy(np.ascontiguousarray((t * gauss)[::-1, ::-1])) for t in (x, y))


def _derivative_spectrum(factors: tuple[torch.Tensor, torch.Tensor], h: int, w: int) -> torch.Tensor:
    """(2, h, w) spectra of dx and dy, centred on pixel [0, 0] (circular convolution by FFT)."""
    g, xg = factors
    r = g.numel() // 2
    wrapped = torch.zeros(2, h, w, dtype=g.dtype, device=g.device)
    wrapped[:, : 2 * r + 1, : 2 * r + 1] = torch.stack((torch.outer(g, xg), torch.outer(xg, g)))
    return torch.fft.fft2(torch.roll(wrapped, (-r, -r), dims=(-2, -1)))


def _conv2_same(maps: torch.Tensor, spectrum: torch.Tensor, kernel_spectrum: torch.Tensor, factors) -> torch.Tensor:
    """MATLAB conv2(map, k, 'same') (zero padding) of complex (B, C, H, W) maps by dx and dy.

    The product with the kernels' spectra gives the circular convolution, which is the zero-padded
    one except within a kernel radius of the border; those strips are recomputed directly.
    `spectrum` is fft2(maps), `kernel_spectrum` and `factors` are the kernels'. -> (B, C, 2, H, W).
    """
    h, w = maps.shape[-2:]
    g, xg = factors
    r = g.numel() // 2
    out = torch.fft.ifft2(spectrum.unsqueeze(2) * kernel_spectrum)
    # conv2d correlates, conv2 convolves: flip the factors; the column pass, then the row pass
    col = torch.stack((g.flip(0), xg.flip(0))).view(2, 1, -1, 1)
    row = torch.stack((xg.flip(0), g.flip(0))).view(2, 1, 1, -1)

    def direct(strip: torch.Tensor, pad: tuple[int, int, int, int]) -> torch.Tensor:
        lead = strip.shape[:-2]
        parts = torch.stack((strip.real, strip.imag), dim=-3).reshape(-1, 1, *strip.shape[-2:])
        res = torch.nn.functional.conv2d(torch.nn.functional.pad(parts, pad), col)
        res = torch.nn.functional.conv2d(res, row, groups=2)
        res = res.reshape(*lead, 2, 2, *res.shape[-2:])  # (..., real/imag, kernel, h, w)
        return torch.complex(res[..., 0, :, :, :], res[..., 1, :, :, :])

    out[..., :r, :] = direct(maps[..., : 2 * r, :], (r, r, r, 0))
    out[..., h - r :, :] = direct(maps[..., h - 2 * r :, :], (r, r, 0, r))
    out[..., :, :r] = direct(maps[..., :, : 2 * r], (r, 0, r, r))
    out[..., :, w - r :] = direct(maps[..., :, w - 2 * r :], (0, r, r, r))
    return out


def _log_gabor_filters(rows: int, cols: int, min_wavelength: float, device, dtype) -> torch.Tensor:
    """The release's logGabors: (12, rows, cols) frequency-domain filters, scale-major, DC at [0, 0]."""
    kw = {"dtype": dtype, "device": device}

    def axis(n):
        if n % 2:
            return torch.arange(-(n - 1) / 2, (n - 1) / 2 + 1, **kw) / (n - 1)
        return torch.arange(-n / 2, n / 2, **kw) / n

    y, x = torch.meshgrid(axis(rows), axis(cols), indexing="ij")
    radius = torch.fft.ifftshift(torch.sqrt(x * x + y * y))
    theta = torch.fft.ifftshift(torch.atan2(-y, x))
    radius[0, 0] = 1
    sintheta, costheta = torch.sin(theta), torch.cos(theta)
    theta_sigma = math.pi / N_GABOR_ORIENTS / D_THETA_ON_SIGMA
    filters = []
    for s in range(N_GABOR_SCALES):
        fo = 1.0 / (min_wavelength * MULT**s)
        radial = torch.exp(-(torch.log(radius / fo) ** 2) / (2 * math.log(SIGMA_ON_F) ** 2))
        radial[0, 0] = 0
        for o in range(N_GABOR_ORIENTS):
            angle = o * math.pi / N_GABOR_ORIENTS
            ds = sintheta * math.cos(angle) - costheta * math.sin(angle)
            dc = costheta * math.cos(angle) + sintheta * math.sin(angle)
            dtheta = torch.atan2(ds, dc).abs()
            filters.append(radial * torch.exp(-(dtheta**2) / (2 * theta_sigma**2)))
    return torch.stack(filters)


def _weibull_pyiqa(x: torch.Tensor, iters: int = 50, tol: float = 1e-2) -> tuple[torch.Tensor, torch.Tensor]:
    """pyiqa's fitweibull: Newton on the shape from 1.2/std(log x), per image until the largest
    update over all of that image's fits is below `tol`. x: (B, C, patches, N). -> (shape, scale)."""
    lead = x.shape[:-1]
    log_x = torch.log(x.reshape(x.shape[0], -1, x.shape[-1]))
    k = 1.2 / log_x.std(dim=-1, keepdim=True)
    mean_log = log_x.mean(dim=-1, keepdim=True)
    active = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
    for _ in range(iters):
        s0, s1, s2 = _power_moments(log_x, k)
        f = s1 / s0 - mean_log - 1.0 / k
        f_prime = (s2 / s0 - (s1 / s0 * s1 / s0)) + 1.0 / (k * k)
        step = torch.where(active.view(-1, 1, 1), k - f / f_prime, k)
        change = (step - k).abs().flatten(1)
        # a NaN anywhere keeps the image iterating, as torch's max propagates it
        error = torch.where(change.isnan().any(1), math.inf, change.nan_to_num(0.0).amax(1))
        k = step
        active = active & ~(error < tol)
        if not bool(active.any()):
            break
    scale = (_power_moments(log_x, k)[0] / x.shape[-1]) ** (1.0 / k)
    return k.reshape(lead), scale.reshape(lead)


def _power_moments(log_x: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Sums over the last dim of x^k, x^k log x and x^k log^2 x, for (B, R, N) log x and (B, R, 1) k."""
    rows = max(1, CHUNK_ELEMENTS // (log_x.shape[0] * log_x.shape[-1]))
    out = []
    for i in range(0, log_x.shape[1], rows):
        chunk = log_x[:, i : i + rows]
        power = torch.mul(chunk, k[:, i : i + rows]).exp_()
        s0 = power.sum(-1)
        s1 = power.mul_(chunk).sum(-1)
        out.append(torch.stack((s0, s1, power.mul_(chunk).sum(-1)), dim=-1))
    return torch.cat(out, dim=1).unsqueeze(-2).unbind(-1)


def weibull_mle(x: torch.Tensor, iters: int = 100, tol: float = 1e-7) -> tuple[torch.Tensor, torch.Tensor]:
    """MATLAB wblfit: the maximum-likelihood (shape, scale) per row of (..., N) positive samples.

    Newton converges quadratically: once a step is below tol * shape, the error left is ~tol^2.
    """
    lead = x.shape[:-1]
    log_x = torch.log(x.reshape(x.shape[0], -1, x.shape[-1]))
    top = log_x.amax(dim=-1, keepdim=True)
    centred = log_x - top  # <= 0, so exp(k * centred) never overflows
    mean_log = centred.mean(dim=-1, keepdim=True)
    k = 1.2 / log_x.std(dim=-1, keepdim=True)
    for _ in range(iters):
        s0, s1, s2 = _power_moments(centred, k)
        m1 = s1 / s0
        f = m1 - mean_log - 1.0 / k
        f_prime = s2 / s0 - m1 * m1 + 1.0 / (k * k)
        new = k - f / f_prime
        new = torch.where(new > 0, new, k / 2)  # keep the shape positive
        # rows without a finite shape (constant patches) cannot converge: do not wait for them
        done = bool(((new - k).abs() <= tol * k).logical_or(~torch.isfinite(new)).all())
        k = new
        if done:
            break
    mean_power = _power_moments(centred, k)[0] / x.shape[-1]
    scale = torch.exp(top + torch.log(mean_power) / k)
    return k.reshape(lead), scale.reshape(lead)
