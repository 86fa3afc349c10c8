"""MATLAB's fspecial('gaussian'), imfilter, filter2 and conv2 as batched torch code: the filtering
section of `banana100.metrics.native.matlab`, whose face exports its public names (conventions:
core.py's docstring)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from banana100.metrics.native.matlab.core import conv2d

# --------------------------------------------------------------------------- filtering


def fspecial_gaussian(
    size: int, sigma: float, *, device=None, dtype=torch.float64, float32: bool = False
) -> torch.Tensor:
    """MATLAB `fspecial('gaussian', size, sigma)`, a (size, size) tensor.

    `float32=True` gives pyiqa's kernel (computed in float64, stored as float32) as float64 values.
    """
    half = (size - 1) / 2.0
    t = np.arange(-half, half + 1, dtype=np.float64)
    k = np.exp(-(t[None, :] ** 2 + t[:, None] ** 2) / (2.0 * sigma * sigma))
    k[k < np.finfo(np.float64).eps * k.max()] = 0
    k = k / k.sum()
    if float32:
        k = k.astype(np.float32)
    return torch.from_numpy(k).to(device=device, dtype=dtype)


def gaussian_1d(
    size: int, sigma: float, *, device=None, dtype=torch.float64
) -> torch.Tensor:
    """The normalised 1-D factor of `fspecial_gaussian(size, sigma)` (its outer square)."""
    half = (size - 1) / 2.0
    t = np.arange(-half, half + 1, dtype=np.float64)
    k = np.exp(-(t**2) / (2.0 * sigma * sigma))
    return torch.from_numpy(k / k.sum()).to(device=device, dtype=dtype)


_PAD_MODES = {"zeros": "constant", "replicate": "replicate", "circular": "circular"}


def pad_same(x: torch.Tensor, kh: int, kw: int, padding: str) -> torch.Tensor:
    """Pad `(N, C, H, W)` so a (kh, kw) correlation gives 'same' size, centred as MATLAB's imfilter.

    padding: 'zeros' (imfilter's default, filter2 'same'), 'replicate', 'symmetric' (MATLAB's
    mirror that repeats the border pixel) or 'circular'.
    """
    top, left = (kh - 1) // 2, (kw - 1) // 2
    pads = (left, kw - 1 - left, top, kh - 1 - top)
    if padding == "symmetric":
        h, w = x.shape[-2:]
        rows = symmetric_index(h, top, kh - 1 - top, x.device)
        cols = symmetric_index(w, left, kw - 1 - left, x.device)
        return x[..., rows[:, None], cols[None, :]]
    if padding not in _PAD_MODES:
        raise ValueError(
            f"padding must be one of zeros, replicate, symmetric, circular; got {padding!r}"
        )
    return F.pad(x, pads, mode=_PAD_MODES[padding])


def symmetric_index(n: int, before: int, after: int, device) -> torch.Tensor:
    idx = torch.arange(-before, n + after, device=device)
    period = 2 * n
    idx = torch.remainder(idx, period)
    return torch.where(idx >= n, period - 1 - idx, idx)


def imfilter(
    x: torch.Tensor, kernel: torch.Tensor, padding: str = "zeros"
) -> torch.Tensor:
    """MATLAB `imfilter(x, kernel, padding)` ('same' size, correlation) of `(..., H, W)` by one 2-D kernel."""
    shape = x.shape
    kh, kw = kernel.shape[-2:]
    x4 = pad_same(x.reshape(-1, 1, *shape[-2:]), kh, kw, padding)
    out = conv2d(x4, kernel.to(device=x.device, dtype=x.dtype).reshape(1, 1, kh, kw))
    return out.reshape(shape)


def imfilter_separable(
    x: torch.Tensor, k_col: torch.Tensor, k_row: torch.Tensor, padding: str = "zeros"
) -> torch.Tensor:
    """`imfilter(x, outer(k_col, k_row), padding)` as two 1-D passes (much faster for 7x7 and up)."""
    shape = x.shape
    kh, kw = k_col.numel(), k_row.numel()
    x4 = pad_same(x.reshape(-1, 1, *shape[-2:]), kh, kw, padding)
    x4 = conv2d(x4, k_col.to(device=x.device, dtype=x.dtype).reshape(1, 1, kh, 1))
    x4 = conv2d(x4, k_row.to(device=x.device, dtype=x.dtype).reshape(1, 1, 1, kw))
    return x4.reshape(shape)


def _symmetric_passes(p: torch.Tensor, k_1d: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """The two 1-D passes of `imfilter_symmetric_separable` over the padded (N, 1, H + 2r, W + 2r) images."""
    r = k_1d.numel() // 2
    weights = [float(v) for v in k_1d.reshape(-1)[r:]]  # centre, then distance 1 .. r
    cols = p[..., r : r + h, :] * weights[0]
    pair = torch.empty_like(cols)
    for d in range(1, r + 1):
        cols.add_(torch.add(p[..., r - d : r - d + h, :], p[..., r + d : r + d + h, :], out=pair), alpha=weights[d])
    out = cols[..., r : r + w] * weights[0]
    pair = pair[..., :w]
    for d in range(1, r + 1):
        out.add_(torch.add(cols[..., r - d : r - d + w], cols[..., r + d : r + d + w], out=pair), alpha=weights[d])
    return out


def imfilter_symmetric_separable(x: torch.Tensor, k_1d: torch.Tensor, padding: str = "zeros") -> torch.Tensor:
    """`imfilter(x, outer(k_1d, k_1d), padding)` for a symmetric odd 1-D factor, in x's dtype.

    Two passes of shifted slices, pairing the pixels that share a weight: elementwise work, several
    times faster on CPU than a one-channel `conv2d` (which goes through im2col), and on GPUs free of
    cuDNN's TF32 convolutions. `(..., H, W)`, any leading shape.
    """
    h, w = x.shape[-2:]
    size = k_1d.numel()
    p = pad_same(x.reshape(-1, 1, h, w), size, size, padding)
    return _symmetric_passes(p, k_1d, h, w).reshape(x.shape)


def imfilter_moments_separable(
    x: torch.Tensor, k_1d: torch.Tensor, padding: str = "zeros"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(imfilter(x), imfilter(x*x)) as `imfilter_symmetric_separable`, in one pass over both."""
    h, w = x.shape[-2:]
    size = k_1d.numel()
    r = size // 2
    flat = x.reshape(-1, 1, h, w)
    if padding == "zeros":  # straight into one padded buffer: no stacked and padded copies
        p = flat.new_zeros(2, flat.shape[0], 1, h + 2 * r, w + 2 * r)
        p[0, ..., r : r + h, r : r + w] = flat
        torch.mul(flat, flat, out=p[1, ..., r : r + h, r : r + w])
        p = p.flatten(0, 1)
    else:
        p = pad_same(torch.cat([flat, flat * flat]), size, size, padding)
    out = _symmetric_passes(p, k_1d, h, w)
    n = flat.shape[0]
    return out[:n].reshape(x.shape), out[n:].reshape(x.shape)


@lru_cache(maxsize=32)
def _rank1_split(
    kernel_bytes: bytes, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(column factor, row factor, residual) with kernel = outer(col, row) + residual, or None if far from rank 1."""
    kernel = np.frombuffer(kernel_bytes, dtype=np.float64).reshape(shape)
    u, s, vt = np.linalg.svd(kernel)
    col, row = u[:, 0] * np.sqrt(s[0]), vt[0] * np.sqrt(s[0])
    residual = kernel - np.outer(col, row)
    if np.abs(residual).max() > 1e-6 * np.abs(kernel).max():
        return None
    return col, row, residual


def imfilter_near_separable(
    x: torch.Tensor, kernel: torch.Tensor, padding: str
) -> torch.Tensor:
    """`imfilter(x, kernel, padding)` for a kernel that is nearly rank 1 (a rounded Gaussian), fast.

    Two float64 1-D passes with the rank-1 factors plus a float32 2-D pass with the tiny
    residual: the same kernel values as the 2-D filter (so structure-free areas get the same
    tiny deviations, whose signs NSS features count), to ~1e-13 of the pixel scale.
    Falls back to `imfilter` when the kernel is not nearly rank 1.
    """
    k64 = kernel.detach().to("cpu", torch.float64).contiguous()
    split = _rank1_split(k64.numpy().tobytes(), tuple(k64.shape))
    if split is None:
        return imfilter(x, kernel, padding)
    col, row, residual = (torch.from_numpy(a).to(x.device) for a in split)
    out = imfilter_separable(x, col, row, padding)
    shape = x.shape
    kh, kw = residual.shape
    x32 = pad_same(x.reshape(-1, 1, *shape[-2:]).to(torch.float32), kh, kw, padding)
    correction = conv2d(x32, residual.to(torch.float32).reshape(1, 1, kh, kw))
    return out + correction.to(x.dtype).reshape(shape)


@lru_cache(maxsize=32)
def _symmetric_classes(
    kernel_bytes: bytes, shape: tuple[int, int]
) -> tuple[int, tuple] | None:
    """(radius, ((dx, dy, weight), ...) with dx <= dy) of a square, odd, 8-fold symmetric kernel
    whose filtering of 16-bit integers is exact in float64; None otherwise.

    Exact: weights are float32 values (24 bits) and every sum of 8 neighbours of 16-bit
    integers fits 20 bits, so each weight * sum is exact, and all of them lie on the kernel's
    2^-finest grid below 2^17, so their total is exact too.
    """
    kernel = np.frombuffer(kernel_bytes, dtype=np.float64).reshape(shape)
    size = shape[0]
    if shape[0] != shape[1] or size % 2 == 0:
        return None
    if not (
        np.array_equal(kernel, kernel.T)
        and np.array_equal(kernel, kernel[::-1])
        and np.array_equal(kernel, kernel[:, ::-1])
    ):
        return None
    if not np.array_equal(kernel.astype(np.float32).astype(np.float64), kernel):
        return None
    finest = next(
        (s for s in range(80) if np.all(np.trunc(kernel * 2.0**s) == kernel * 2.0**s)),
        None,
    )
    if finest is None or 65535.0 * np.abs(kernel).sum() * 2.0**finest >= 2.0**53:
        return None
    r = size // 2
    return r, tuple(
        (dx, dy, float(kernel[r + dy, r + dx]))
        for dx in range(r + 1)
        for dy in range(dx, r + 1)
    )


def _symmetric_filter(
    planes: torch.Tensor, r: int, classes: tuple, padding: str
) -> torch.Tensor:
    """Filter (N, 1, H, W) float32 integer planes (< 2^16) by a symmetric kernel -> float64, exactly.

    The sums of the (up to 8) pixels sharing a weight are integers below 2^24, exact in
    float32; each is then added to the float64 result times its weight.
    """
    n, _, h, w = planes.shape
    p = pad_same(planes, 2 * r + 1, 2 * r + 1, padding)
    # horizontal pairs at distance dx (dx = 0: the pixel itself), on every padded row
    rows = [p[..., :, r : r + w]] + [
        p[..., :, r - d : r - d + w] + p[..., :, r + d : r + d + w]
        for d in range(1, r + 1)
    ]

    def vertical(t: torch.Tensor, d: int) -> torch.Tensor:
        return (
            t[..., r : r + h, :]
            if d == 0
            else t[..., r - d : r - d + h, :] + t[..., r + d : r + d + h, :]
        )

    out = torch.zeros(n, 1, h, w, dtype=torch.float64, device=planes.device)
    for dx, dy, weight in classes:
        ring = (
            vertical(rows[dx], dy)
            if dx == dy
            else vertical(rows[dx], dy) + vertical(rows[dy], dx)
        )
        out.add_(
            ring, alpha=weight
        )  # float64: weight * ring and the running sum are exact
    return out


def _classes_for(x: torch.Tensor, kernel: torch.Tensor):
    if x.device.type != "cpu":
        return None
    k64 = kernel.detach().to("cpu", torch.float64).contiguous()
    return _symmetric_classes(k64.numpy().tobytes(), tuple(k64.shape))


def imfilter_integer(
    x: torch.Tensor, kernel: torch.Tensor, padding: str, max_value: int
) -> torch.Tensor:
    """`imfilter(x, kernel, padding)` for integer-valued float64 `(..., H, W)` in [0, max_value <= 65535].

    For a symmetric float32-valued kernel (pyiqa's Gaussian windows) every partial sum is exact
    in float64, so the result does not depend on the order of summation: on CPU it is computed
    from float32 sums of the pixels that share a weight, bit-for-bit what a float64 `conv2d`
    gives, several times faster. Otherwise, and on other devices, it is the float64 `imfilter`.
    """
    found = _classes_for(x, kernel) if max_value <= 65535 else None
    if found is None:
        return imfilter(x, kernel, padding)
    planes = x.reshape(-1, 1, *x.shape[-2:]).to(torch.float32)
    return _symmetric_filter(planes, *found, padding).reshape(x.shape)


def imfilter_moments_integer(
    x: torch.Tensor, kernel: torch.Tensor, padding: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(imfilter(x), imfilter(x*x)) for x of integers in [0, 255], in one exact pass (see `imfilter_integer`)."""
    found = _classes_for(x, kernel)
    if found is None:
        return imfilter(x, kernel, padding), imfilter(x * x, kernel, padding)
    x32 = x.reshape(-1, 1, *x.shape[-2:]).to(torch.float32)
    out = _symmetric_filter(torch.cat([x32, x32 * x32]), *found, padding)
    n = x32.shape[0]
    return out[:n].reshape(x.shape), out[n:].reshape(x.shape)


def filter2_same(kernel: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """MATLAB `filter2(kernel, x, 'same')`: correlation with zero padding."""
    return imfilter(x, kernel, padding="zeros")


def conv2_same(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """MATLAB `conv2(x, kernel, 'same')`: true convolution (flipped kernel), zero padding."""
    kh, kw = kernel.shape[-2:]
    flipped = torch.flip(kernel, dims=(-2, -1))
    # 'same' keeps the full convolution from row floor(kh/2) on (0-based), hence this padding
    shape = x.shape
    top, left = kh - 1 - kh // 2, kw - 1 - kw // 2
    x4 = F.pad(x.reshape(-1, 1, *shape[-2:]), (left, kw - 1 - left, top, kh - 1 - top))
    out = conv2d(x4, flipped.to(device=x.device, dtype=x.dtype).reshape(1, 1, kh, kw))
    return out.reshape(shape)
