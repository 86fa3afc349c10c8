"""The image-processing steps the edit_damage detector's components are made of: a separable Gaussian (summed in
strips of rows on the CPU), 2x2 means, BT.601 luma, differences, bilinear reads at points, window sums. Each gives
the numbers of the plain torch expression it replaces, in less time or memory where its docstring says so (with the
measurement); model.py holds what the components measure with them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def gauss_kernel(sigma: float, device, dtype) -> torch.Tensor:
    radius = max(1, math.ceil(3 * sigma))
    t = torch.arange(-radius, radius + 1, device=device, dtype=dtype)
    k = torch.exp(-t * t / (2 * sigma * sigma))
    return k / k.sum()


def separable(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """x (B,C,H,W) filtered by the 1-D kernel k along both axes, reflect-padded."""
    c, r = x.shape[1], k.numel() // 2
    x = F.pad(x, (r, r, 0, 0), mode="reflect") if r < x.shape[-1] else F.pad(x, (r, r, 0, 0), mode="replicate")
    if x.device.type != "cpu":
        x = F.conv2d(x, k.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
        x = F.pad(x, (0, 0, r, r), mode="reflect") if r < x.shape[-2] else F.pad(x, (0, 0, r, r), mode="replicate")
        return F.conv2d(x, k.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)
    h = x.shape[-2]
    if r >= h:  # too few rows to reflect: replicated, as F.pad would
        return separable_taps(F.pad(separable_taps(x, k, -1), (0, 0, r, r), mode="replicate"), k, -2)
    # the first pass writes into the second's padded plane, whose reflected rows are then copied in: F.pad's numbers
    # without a plane more to allocate and fill (each new plane is first touched, page by page, on the CPU)
    padded = x.new_empty(*x.shape[:-2], h + 2 * r, x.shape[-1] - 2 * r)
    separable_taps(x, k, -1, out=padded[..., r:r + h, :])
    padded[..., :r, :] = padded[..., r + 1:2 * r + 1, :].flip(-2)
    padded[..., r + h:, :] = padded[..., h - 1:h + r - 1, :].flip(-2)
    return separable_taps(padded, k, -2)


# the CPU filter sums in strips of rows of about this many bytes of output, so that a strip and its input stay in a
# core's L2 cache (2 MiB a core where it was chosen) across the kernel's taps; a whole plane of a 1024 px image went
# to memory once a tap (bench/detector/bench_edit_damage.py --baseline 53c5202: 1024 px x0.81-0.89, 512 px x0.84-0.99)
STRIP_BYTES = 512 * 1024


def separable_taps(x: torch.Tensor, k: torch.Tensor, dim: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """The 1-D correlation of x (padded along `dim`, -1 or -2) with k as a sum of shifted copies: on CPU far
    faster than oneDNN's one-channel convolution, which took about 60 % of a 1024 px image's
    time (`git show b381d54:BENCHMARKS.md`, the edit_damage cost); equal to it to float32 rounding. Summed in
    strips of rows (STRIP_BYTES): the same sums in the same order, so the same numbers as whole planes. `out`: a
    tensor of the result's shape (a view) to write into."""
    axis = dim % x.ndim - x.ndim
    if axis not in (-1, -2):
        raise ValueError(f"separable_taps filters along the last two dimensions, not {dim}")
    n = x.shape[axis] - k.numel() + 1
    shape = list(x.shape)
    shape[axis] = n
    if out is None:
        out = x.new_empty(shape)
    elif list(out.shape) != shape:
        raise ValueError(f"separable_taps: out has shape {tuple(out.shape)}, the result {tuple(shape)}")
    weights = k.tolist()
    rows = out.shape[-2]
    per_row = out[..., :1, :].numel() * out.element_size()
    step = max(1, STRIP_BYTES // per_row)
    for top in range(0, rows, step):
        bottom = min(rows, top + step)
        part = out[..., top:bottom, :]
        # the strip's input: the same rows across (dim -1), or its rows and the kernel's reach below (dim -2)
        src = x[..., top:bottom, :] if axis == -1 else x[..., top:bottom + k.numel() - 1, :]
        torch.mul(src.narrow(axis, 0, part.shape[axis]), weights[0], out=part)
        for j, w in enumerate(weights[1:], start=1):
            part.add_(src.narrow(axis, j, part.shape[axis]), alpha=w)
    return out


def means_2x2(x: torch.Tensor) -> torch.Tensor:
    """avg_pool2d(x, 2), the same numbers (its four values summed in its order, then a quarter), in less time on
    one CPU thread: the whole detector 0.94-0.97 of its time with avg_pool2d (bench_edit_damage --baseline 31354ba)."""
    h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2
    x = x[..., :h, :w]
    out = x[..., 0::2, 0::2] + x[..., 0::2, 1::2]  # then added to in place: one new plane, not four
    return out.add_(x[..., 1::2, 0::2]).add_(x[..., 1::2, 1::2]).mul_(0.25)


def luma_of(rgb: torch.Tensor) -> torch.Tensor:
    """BT.601 luma (B, 1, H, W) of (B, 3, H, W): 0.299 R + 0.587 G + 0.114 B, summed in that order in place (the same
    numbers as the expression, two new planes instead of five)."""
    luma = rgb[:, 0:1] * 0.299
    part = rgb[:, 1:2] * 0.587
    luma.add_(part)
    return luma.add_(torch.mul(rgb[:, 2:3], 0.114, out=part))


def float64_total(plane: torch.Tensor, buffer: torch.Tensor | None = None) -> torch.Tensor:
    """plane.sum((1, 2), dtype=torch.float64), bit for bit. On the CPU that sum makes a new float64 copy of the plane
    each call; with `buffer` (a float64 tensor of the plane's shape, reused across calls) it makes none."""
    return plane.sum((1, 2), dtype=torch.float64) if buffer is None else buffer.copy_(plane).sum((1, 2))


def padded_difference(x: torch.Tensor, dim: int, span: int, at: int) -> torch.Tensor:
    """x[.., i + span] - x[.., i] along `dim`, placed from index `at` in a plane of x's shape that is 0 elsewhere:
    F.pad of the difference, written in place (one new plane, not two)."""
    n = x.shape[dim] - span
    out = x.new_empty(x.shape)
    torch.sub(x.narrow(dim, span, n), x.narrow(dim, 0, n), out=out.narrow(dim, at, n))
    out.narrow(dim, 0, at).zero_()
    out.narrow(dim, at + n, x.shape[dim] - at - n).zero_()
    return out


def central_differences(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x[.., i + 1] - x[.., i - 1] along columns, the same along rows) of a (B, 1, H, W) image, 0 on the border."""
    return padded_difference(x, -1, 2, 1), padded_difference(x, -2, 2, 1)


def take(flat: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """flat[index] (a 1-D tensor's values at non-negative int64 indices of any shape) by index_select: the same
    values in less time on the CPU than advanced indexing, which took a tenth of a 512 px image's time in the point
    reads (bench/detector/bench_edit_damage.py --profile 512)."""
    return flat.index_select(0, index.reshape(-1)).view(index.shape)


def bilinear_at(plane: torch.Tensor, image: torch.Tensor, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A (B, 1, H, W) plane's bilinear values at points: image indices, and fractional rows and columns (any
    shape the indices broadcast against), clamped to the frame as grid_sample's border padding. In place where
    it can: on the whole-image path (a GPU's) each plane it holds is the batch's size, and the index is int64."""
    h, w = plane.shape[-2:]
    flat = plane.contiguous().flatten()
    fy, fx = y.clamp(0, h - 1), x.clamp(0, w - 1)  # new tensors: the fractions are made in them
    y0, x0 = fy.floor().clamp_(max=max(h - 2, 0)), fx.floor().clamp_(max=max(w - 2, 0))
    fy.sub_(y0)
    fx.sub_(x0)
    index = y0.long().mul_(w).add_(x0.long()).add_(image * (h * w))
    del y0, x0
    dy, dx = (w if h > 1 else 0), (1 if w > 1 else 0)
    rest = 1 - fx
    top = take(flat, index).mul_(rest)
    top.add_(take(flat, index.add_(dx)).mul_(fx))
    bottom = take(flat, index.add_(dy)).mul_(fx)
    bottom.add_(take(flat, index.sub_(dx)).mul_(rest))
    del index, rest
    return top.mul_(1 - fy).add_(bottom.mul_(fy))


def bilinear_grid(plane: torch.Tensor, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A (B, 1, H, W) plane's bilinear values at fractional rows and columns of shape (B, 1, H, W, ...), by the
    same arithmetic as `bilinear_at` (grid_sample's normalised coordinates round differently, and a threshold can
    flip)."""
    image = torch.arange(plane.shape[0], device=plane.device).view(-1, *([1] * (y.ndim - 1)))
    return bilinear_at(plane, image, y, x)


def window_sum(x: torch.Tensor, k: int, dim: int) -> torch.Tensor:
    """The sums of k consecutive values along `dim` (length n - k + 1), by doubling: sums of 1, 2, 4, ...
    values, added where k's binary digits say (log2 k full-size adds; a cumulative sum costs more and,
    in float32, loses the small differences of large running totals)."""
    m = x.shape[dim] - k + 1
    out, offset, power, p = None, 0, x, 1  # power[i] = x[i] + ... + x[i + p - 1]
    while True:
        if k & 1:
            part = power.narrow(dim, offset, m)
            out = part.clone() if out is None else out.add_(part)
            offset += p
        k >>= 1
        if not k:
            return out
        n = power.shape[dim] - p
        power = power.narrow(dim, 0, n) + power.narrow(dim, p, n)
        p *= 2


def fft_length(n: int) -> int:
    """The least length >= n with no prime factor above 11 (pocketfft is slow on larger ones: 544 = 32 x 17
    takes twice 560's time)."""
    while True:
        m = n
        for p in (2, 3, 5, 7, 11):
            while m % p == 0:
                m //= p
        if m == 1:
            return n
        n += 1


def gauss(x: torch.Tensor, sigma: float) -> torch.Tensor:
    return separable(x, gauss_kernel(sigma, x.device, x.dtype))
