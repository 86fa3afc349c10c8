"""MATLAB-compatible image primitives as batched, device-agnostic torch code.

The original releases of the hand-crafted metrics are MATLAB programs; these functions reproduce
the MATLAB built-ins they call (`imresize`, `rgb2gray`, `fspecial('gaussian')`, `imfilter`,
`filter2`) on tensors of any leading shape, on whatever device the input lives.

Conventions: images are `(..., H, W)` tensors (colour functions take `(..., 3, H, W)`), pixel
values on the 0-255 scale unless a docstring says otherwise, float64 unless a docstring says
otherwise. Every tensor made here is made on `x.device`.

Here: the convolution policy, rounding and colour; `resize` holds imresize (MATLAB's and pyiqa's
float32 port), `filter` the filtering; the package's face (`matlab/__init__.py`) exports all three.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# MATLAB rgb2gray: the first row of inv(YIQ->RGB), as printed in rgb2gray.m.
RGB2GRAY = (0.298936021293775, 0.587043074451121, 0.114020904255103)
# pyiqa's `rgb2yiq` Y row (what `to_y_channel(..., color_space="yiq")` uses).
YIQ_Y = (0.299, 0.587, 0.114)
# pyiqa's `rgb2ycbcr` Y row (BT.601, on the 0-1 scale, plus 16/255).
YCBCR_Y = (65.481, 128.553, 24.966)


# CPU convolution policy (bench/engine/bench_conv.py measures it against plain F.conv2d calls): each
# image of a batch alone, in strips of about this many input bytes (fastest from 0.5K to 2K wide).
# CPU_CONV_POLICY = False makes conv2d a plain F.conv2d call.
CONV_STRIP_BYTES = 512 * 1024
CPU_CONV_POLICY = True


def conv2d(x: torch.Tensor, weight: torch.Tensor, groups: int = 1) -> torch.Tensor:
    """`F.conv2d` (no padding) of each image of `x` alone, bit for bit, faster on CPU.

    oneDNN convolves a large few-channel image far below its speed on small ones: PIQE's 7x7
    pair at 2K runs about 2x faster in strips of `CONV_STRIP_BYTES` (bench/engine/bench_conv.py). So on
    CPU each image goes alone (a batched float32 call can round differently from the one-image
    calls pyiqa makes) and, when large, in strips: every output pixel gets the arithmetic of the
    single call (tests/metrics/native/test_native_common.py checks it). In float32, oneDNN switches algorithm
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
    tests/metrics/native/test_native_common.py) and ~25x faster at 512 px than the 3-column product, whose
    3-wide output takes a slow BLAS path (bench/metrics/bench_y_channel.py).
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
