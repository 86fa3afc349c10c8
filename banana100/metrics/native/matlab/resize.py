"""MATLAB's imresize (bicubic, antialiased, any scale) and pyiqa's float32 port of it, as batched
torch code: the `imresize` section of `banana100.metrics.native.matlab`, whose face exports its public
names (conventions: core.py's docstring)."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from banana100.metrics.native.matlab.core import to_uint8
from banana100.metrics.native.matlab.filter import symmetric_index

# --------------------------------------------------------------------------- imresize


def _cubic(x: np.ndarray) -> np.ndarray:
    """MATLAB's bicubic kernel (Keys, a = -0.5)."""
    ax = np.abs(x)
    ax2, ax3 = ax * ax, ax * ax * ax
    return (1.5 * ax3 - 2.5 * ax2 + 1) * (ax <= 1) + (
        -0.5 * ax3 + 2.5 * ax2 - 4 * ax + 2
    ) * ((ax > 1) & (ax <= 2))


@lru_cache(maxsize=256)
def _resize_matrix(
    in_len: int, out_len: int, scale: float, antialiasing: bool
) -> np.ndarray:
    """The (out_len, in_len) float64 matrix of MATLAB imresize's `contributions` along one axis."""
    kernel_width = 4.0
    if scale < 1 and antialiasing:
        # antialiasing: stretch the kernel by 1/scale (and scale its height to keep unit area)
        def kernel(t):
            return scale * _cubic(scale * t)

        kernel_width = kernel_width / scale
    else:
        kernel = _cubic
    out_pos = np.arange(1, out_len + 1, dtype=np.float64)
    centre = out_pos / scale + 0.5 * (
        1 - 1 / scale
    )  # 1-based input coordinate of each output
    left = np.floor(centre - kernel_width / 2)
    taps = math.ceil(kernel_width) + 2
    idx = left[:, None] + np.arange(taps, dtype=np.float64)[None, :]
    w = kernel(centre[:, None] - idx)
    w = w / w.sum(axis=1, keepdims=True)
    # symmetric mirroring at the borders: 1..n, n..1, repeated
    mirror = np.concatenate([np.arange(in_len), np.arange(in_len - 1, -1, -1)])
    cols = mirror[np.mod(idx.astype(np.int64) - 1, 2 * in_len)]
    m = np.zeros((out_len, in_len), dtype=np.float64)
    np.add.at(m, (np.repeat(np.arange(out_len), taps), cols.ravel()), w.ravel())
    return m


_DEVICE_MATRICES: dict = {}


def resize_matrix(
    in_len: int, out_len: int, scale: float, antialiasing: bool, device, dtype
) -> torch.Tensor:
    """`_resize_matrix` as a cached tensor on `device`."""
    key = (in_len, out_len, float(scale), antialiasing, str(device), dtype)
    m = _DEVICE_MATRICES.get(key)
    if m is None:
        if len(_DEVICE_MATRICES) > 512:
            _DEVICE_MATRICES.clear()
        m = torch.from_numpy(
            _resize_matrix(in_len, out_len, float(scale), antialiasing)
        ).to(device=device, dtype=dtype)
        _DEVICE_MATRICES[key] = m
    return m


_DEVICE_BANDS: dict = {}


def resize_band(
    in_len: int, out_len: int, scale: float, antialiasing: bool, device, dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """The resize matrix as (first column (out,), weights (out, taps)): row j's nonzeros lie in
    columns first[j] .. first[j] + taps - 1. Cached on `device`."""
    key = (in_len, out_len, float(scale), antialiasing, str(device), dtype)
    band = _DEVICE_BANDS.get(key)
    if band is None:
        if len(_DEVICE_BANDS) > 512:
            _DEVICE_BANDS.clear()
        m = _resize_matrix(in_len, out_len, float(scale), antialiasing)
        nonzero = m != 0
        first = nonzero.argmax(axis=1)
        last = in_len - 1 - nonzero[:, ::-1].argmax(axis=1)
        taps = int((last - first).max()) + 1
        first = np.minimum(first, in_len - taps)
        weights = m[
            np.arange(out_len)[:, None], first[:, None] + np.arange(taps)[None, :]
        ]
        band = (
            torch.from_numpy(first).to(device),
            torch.from_numpy(weights).to(device=device, dtype=dtype),
        )
        _DEVICE_BANDS[key] = band
    return band


def _resize_axis(
    t: torch.Tensor,
    axis: int,
    in_len: int,
    out_len: int,
    scale: float,
    antialiasing: bool,
) -> torch.Tensor:
    """One 1-D pass of imresize along axis -2 or -1.

    On CPU the banded form (a few taps per output) beats the dense product by far on large
    images; elsewhere the dense matrix product is what the hardware does best.
    """
    if t.device.type != "cpu":
        m = resize_matrix(in_len, out_len, scale, antialiasing, t.device, t.dtype)
        return torch.matmul(m, t) if axis == -2 else torch.matmul(t, m.t())
    first, weights = resize_band(
        in_len, out_len, scale, antialiasing, t.device, t.dtype
    )
    out = None
    for tap in range(weights.shape[1]):
        w = weights[:, tap].view(-1, 1) if axis == -2 else weights[:, tap]
        picked = t.index_select(axis, first + tap)
        out = picked.mul_(w) if out is None else out.addcmul_(picked, w)
    return out


def imresize(
    x: torch.Tensor,
    scale: float | None = None,
    size: tuple[int, int] | None = None,
    *,
    antialiasing: bool = True,
    uint8: bool = False,
) -> torch.Tensor:
    """MATLAB `imresize(x, scale)` / `imresize(x, [h w])`, bicubic, on `(..., H, W)`.

    Output size is `ceil(scale * H)` x `ceil(scale * W)` for a scale, as MATLAB. Each axis is a
    product with a cached weight matrix (the cubic kernel, widened by 1/scale when shrinking with
    antialiasing, borders mirrored symmetrically; on CPU applied in its banded form). The axis with the smaller scale goes first
    (height on ties), as MATLAB. `uint8=True` emulates a uint8 input: after each 1-D pass the
    values are rounded and saturated to [0, 255], as MATLAB stores each pass in the input class.
    Works in x's dtype if floating (float64 recommended), else float64.
    """
    if (scale is None) == (size is None):
        raise ValueError("imresize: give exactly one of scale or size")
    if not x.is_floating_point():
        x = x.to(torch.float64)
    h, w = x.shape[-2:]
    if scale is not None:
        out_h, out_w = math.ceil(scale * h), math.ceil(scale * w)
        scale_h = scale_w = float(scale)
    else:
        out_h, out_w = int(size[0]), int(size[1])
        scale_h, scale_w = out_h / h, out_w / w
    if out_h < 1 or out_w < 1:
        raise ValueError(f"imresize: output size {out_h}x{out_w} from {h}x{w} is empty")

    def along_h(t):
        return _resize_axis(t, -2, h, out_h, scale_h, antialiasing)

    def along_w(t):
        return _resize_axis(t, -1, w, out_w, scale_w, antialiasing)

    passes = (along_w, along_h) if scale_w < scale_h else (along_h, along_w)
    for one_pass in passes:
        x = one_pass(x)
        if uint8:
            x = to_uint8(x)
    return x


@lru_cache(maxsize=1)
def _half_taps() -> tuple[float, float, float, float]:
    """The 8 weights of `imresize(x, 0.5)` (antialiased bicubic), symmetric: those at distances 0.5, 1.5, 2.5, 3.5."""
    d = np.array([0.5, 1.5, 2.5, 3.5])
    w = 0.5 * _cubic(0.5 * d)
    return tuple(float(v) for v in w / (2 * w.sum()))


def _half_axis(x: torch.Tensor, dim: int) -> torch.Tensor:
    """One pass of `imresize_half` along dim -2 or -1."""
    n = x.shape[dim]
    out_n = math.ceil(n / 2)
    # output j weighs inputs 2j-3 .. 2j+4 (0-based), mirrored at the borders as MATLAB does
    idx = symmetric_index(n, 3, 2 * out_n + 3 - n, x.device)
    padded = x.index_select(dim, idx)

    def tap(t: int) -> torch.Tensor:
        return padded.narrow(dim, t, 2 * out_n - 1)[(..., slice(None, None, 2)) + (slice(None),) * (-1 - dim)]

    out = torch.zeros_like(tap(0))
    pair = torch.empty_like(out)
    for t, weight in zip((3, 2, 1, 0), _half_taps(), strict=True):
        out.add_(torch.add(tap(t), tap(7 - t), out=pair), alpha=weight)
    return out


def imresize_half(x: torch.Tensor) -> torch.Tensor:
    """MATLAB `imresize(x, 0.5)` (bicubic, antialiased) of `(..., H, W)`, in x's dtype.

    The weights are the same at every output (a stride-2 filter over the mirrored border), so
    each pass is 8 strided slices added up: elementwise work, fast on any device in any dtype.
    Height first, as MATLAB and pyiqa.
    """
    return _half_axis(_half_axis(x, -2), -1)


# --------------------------------------------------------------------------- pyiqa's float32 resize


def pyiqa_imresize(img: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """pyiqa.matlab_utils.imresize as pyiqa runs it: height then width, in float32, no rounding.

    MATLAB's bicubic (antialiased when shrinking) with mirrored borders, like matlab.imresize, but
    the float32 arithmetic matters for small images blown up to 524 px, so it is repeated here:
    float32 weights and products laid out as pyiqa's (N, taps, H, W) so that torch sums the taps
    in the same order. -> float64.
    """
    lead = img.shape[:-2]
    x = img.to(torch.float32).reshape(-1, *img.shape[-2:])
    n = x.shape[0]
    for dim, out_len in ((1, size[0]), (2, size[1])):
        in_len = x.shape[dim]
        scale = out_len / in_len
        if scale == 1:
            continue
        taps, weights, index = pyiqa_resize_taps(in_len, out_len, scale, x.device)
        sample = x.index_select(dim, index.flatten())
        if dim == 1:
            sample = sample.view(n, taps, out_len, x.shape[2])
            weights = weights.view(1, taps, out_len, 1)
        else:
            sample = sample.view(n, x.shape[1], taps, out_len).transpose(1, 2).contiguous()
            weights = weights.view(1, taps, 1, out_len)
        x = (sample * weights).sum(dim=1)
    return x.to(torch.float64).reshape(*lead, *x.shape[-2:])


def pyiqa_resize_taps(in_len: int, out_len: int, scale: float, device) -> tuple[int, torch.Tensor, torch.Tensor]:
    """(taps, float32 weights (taps, out_len), source indices (taps, out_len)) of pyiqa's resize_1d."""
    taps, factor = 4, 1.0
    if scale < 1:  # antialiasing: a kernel widened by 1/scale
        factor = scale
        taps = math.ceil(taps / factor)
    taps += 2
    pos = torch.linspace(0, out_len - 1, steps=out_len, dtype=torch.float32, device=device)
    pos = (pos + 0.5) / scale - 0.5
    base = pos.floor() - (taps // 2) + 1
    dist = pos - base
    offsets = (dist.unsqueeze(0) - torch.arange(taps, dtype=torch.float32, device=device).unsqueeze(1)) * factor
    weights = pyiqa_cubic(offsets)
    weights = weights / weights.sum(dim=0, keepdim=True)
    # input index of each tap, mirrored at the borders with the edge pixel repeated
    src = base.long().unsqueeze(0) + torch.arange(taps, device=device).unsqueeze(1)
    src = torch.where(src < 0, -src - 1, src)
    src = torch.where(src >= in_len, 2 * in_len - 1 - src, src)
    return taps, weights, src


def pyiqa_cubic(x: torch.Tensor, a: float = -0.5) -> torch.Tensor:
    """pyiqa's cubic_contribution (Keys kernel), term for term."""
    ax = x.abs()
    ax2 = ax * ax
    ax3 = ax * ax2
    near = ((a + 2) * ax3 - (a + 3) * ax2 + 1) * ax.le(1).to(x.dtype)
    far = ((a * ax3) - (5 * a * ax2) + (8 * a * ax) - (4 * a)) * torch.logical_and(ax.gt(1), ax.le(2)).to(x.dtype)
    return near + far
