"""MATLAB-compatible image primitives as batched, device-agnostic torch code.

The original releases of the hand-crafted metrics are MATLAB programs; these functions reproduce
the MATLAB built-ins they call (`imresize`, `rgb2gray`, `fspecial('gaussian')`, `imfilter`,
`filter2`) on tensors of any leading shape, on whatever device the input lives.

Conventions: images are `(..., H, W)` tensors (colour functions take `(..., 3, H, W)`), pixel
values on the 0-255 scale unless a docstring says otherwise, float64 unless a docstring says
otherwise. Every tensor made here is made on `x.device`.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

# MATLAB rgb2gray: the first row of inv(YIQ->RGB), as printed in rgb2gray.m.
RGB2GRAY = (0.298936021293775, 0.587043074451121, 0.114020904255103)
# pyiqa's `rgb2yiq` Y row (what `to_y_channel(..., color_space="yiq")` uses).
YIQ_Y = (0.299, 0.587, 0.114)
# pyiqa's `rgb2ycbcr` Y row (BT.601, on the 0-1 scale, plus 16/255).
YCBCR_Y = (65.481, 128.553, 24.966)


# CPU convolution policy (bench/bench_conv.py measures it against plain F.conv2d calls): each
# image of a batch alone, in strips of about this many input bytes (fastest from 0.5K to 2K wide).
# CPU_CONV_POLICY = False makes conv2d a plain F.conv2d call.
CONV_STRIP_BYTES = 512 * 1024
CPU_CONV_POLICY = True


def conv2d(x: torch.Tensor, weight: torch.Tensor, groups: int = 1) -> torch.Tensor:
    """`F.conv2d` (no padding) of each image of `x` alone, bit for bit, faster on CPU.

    oneDNN convolves a large few-channel image far below its speed on small ones: PIQE's 7x7
    pair at 2K runs about 2x faster in strips of `CONV_STRIP_BYTES` (bench/bench_conv.py). So on
    CPU each image goes alone (a batched float32 call can round differently from the one-image
    calls pyiqa makes) and, when large, in strips: every output pixel gets the arithmetic of the
    single call (tests/test_native_common.py checks it). In float32, oneDNN switches algorithm
    for large images with 3-wide or 1-row kernels, which strips would not reproduce to the last
    bit, so float32 strips are used only for kernels of 5x5 and up. GPUs take the whole call.
    """
    if x.device.type != "cpu" or not CPU_CONV_POLICY:
        return F.conv2d(x, weight, groups=groups)
    if x.shape[0] > 1:
        return torch.cat([conv2d(x[i : i + 1], weight, groups) for i in range(x.shape[0])])
    kh, kw = weight.shape[-2:]
    out_h = x.shape[-2] - kh + 1
    rows = max(16, CONV_STRIP_BYTES // (x.shape[1] * x.shape[-1] * x.element_size()))
    if out_h <= rows or (x.dtype != torch.float64 and min(kh, kw) < 5):
        return F.conv2d(x, weight, groups=groups)
    strips = [F.conv2d(x[..., r : min(r + rows, out_h) + kh - 1, :], weight, groups=groups)
              for r in range(0, out_h, rows)]
    return torch.cat(strips, dim=-2)


# --------------------------------------------------------------------------- rounding


def round_half_away(x: torch.Tensor) -> torch.Tensor:
    """MATLAB's `round` (half away from zero); torch.round rounds half to even."""
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


def to_uint8(x: torch.Tensor) -> torch.Tensor:
    """What MATLAB's cast of a double to uint8 gives: round half away, saturate to [0, 255]."""
    return torch.floor(x.clamp(0, 255) + 0.5)


def from_unit_float(x: torch.Tensor) -> torch.Tensor:
    """[0, 1] tensor of uint8/255 values (`engine.to_tensor`) -> the uint8 values, float64."""
    return torch.round(x.to(torch.float64) * 255)


# --------------------------------------------------------------------------- colour


def rgb2gray(x: torch.Tensor, uint8: bool = True) -> torch.Tensor:
    """MATLAB `rgb2gray` of `(..., 3, H, W)` values in [0, 255] -> `(..., 1, H, W)` float64.

    With `uint8=True` the result is rounded and saturated as MATLAB does for a uint8 image
    (the originals call rgb2gray on the uint8 image read by imread).
    """
    x = x.to(torch.float64)
    gray = (
        RGB2GRAY[0] * x[..., 0:1, :, :]
        + RGB2GRAY[1] * x[..., 1:2, :, :]
        + RGB2GRAY[2] * x[..., 2:3, :, :]
    )
    return to_uint8(gray) if uint8 else gray


def pyiqa_y_channel(x: torch.Tensor, color_space: str = "yiq") -> torch.Tensor:
    """pyiqa's `to_y_channel(x, 255, color_space)` of a `(B, 3, H, W)` [0, 1] tensor -> `(B, 1, H, W)` float64.

    pyiqa computes this in the input's float32 and rounds half to even; the rounding of values
    that land on .5 depends on that float32 arithmetic, so it is repeated here as pyiqa does it
    (same weights, same matmul) before going to float64. On CPU only the weights' first column
    goes into the matmul: pyiqa's Y column bit for bit (every one of the 2^24 RGB triples,
    tests/test_native_common.py) and ~25x faster at 512 px than the 3-column product, whose
    3-wide output takes a slow BLAS path (bench/bench_y_channel.py).
    """
    x = x.to(torch.float32)
    y_only = x.device.type == "cpu"
    if color_space == "yiq":
        weights = torch.tensor(
            [
                [0.299, 0.587, 0.114],
                [0.5959, -0.2746, -0.3213],
                [0.2115, -0.5227, 0.3112],
            ],
            dtype=torch.float32,
            device=x.device,
        ).t()
        if y_only:
            weights = weights[:, :1]
        y = torch.matmul(x.permute(0, 2, 3, 1), weights).permute(0, 3, 1, 2)[:, 0:1]
    elif color_space == "ycbcr":
        weights = torch.tensor(
            [
                [65.481, -37.797, 112.0],
                [128.553, -74.203, -93.786],
                [24.966, 112.0, -18.214],
            ],
            dtype=torch.float32,
            device=x.device,
        )
        bias = torch.tensor(
            [16.0, 128.0, 128.0], dtype=torch.float32, device=x.device
        ).view(1, 3, 1, 1)
        if y_only:
            weights, bias = weights[:, :1], bias[:, :1]
        y = (
            (torch.matmul(x.permute(0, 2, 3, 1), weights).permute(0, 3, 1, 2) + bias)
            / 255.0
        )[:, 0:1]
    else:
        raise ValueError(f"color_space must be 'yiq' or 'ycbcr', got {color_space!r}")
    return torch.round(y * 255).to(torch.float64)


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
    idx = _symmetric_index(n, 3, 2 * out_n + 3 - n, x.device)
    padded = x.index_select(dim, idx)

    def tap(t: int) -> torch.Tensor:
        return padded.narrow(dim, t, 2 * out_n - 1)[(..., slice(None, None, 2)) + (slice(None),) * (-1 - dim)]

    out = torch.zeros_like(tap(0))
    pair = torch.empty_like(out)
    for t, weight in zip((3, 2, 1, 0), _half_taps()):
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
        rows = _symmetric_index(h, top, kh - 1 - top, x.device)
        cols = _symmetric_index(w, left, kw - 1 - left, x.device)
        return x[..., rows[:, None], cols[None, :]]
    if padding not in _PAD_MODES:
        raise ValueError(
            f"padding must be one of zeros, replicate, symmetric, circular; got {padding!r}"
        )
    return F.pad(x, pads, mode=_PAD_MODES[padding])


def _symmetric_index(n: int, before: int, after: int, device) -> torch.Tensor:
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
