"""MATLAB's image primitives as batched, device-agnostic torch code (the face of three modules).

`core`: the convolution policy, rounding and colour; `filter`: fspecial, imfilter, filter2, conv2;
`resize`: imresize and pyiqa's float32 port of it. Conventions: core.py's docstring. The children
never import this face.
"""

from banana100.metrics.native.matlab.core import (
    CONV_STRIP_BYTES, CPU_CONV_POLICY, RGB2GRAY, YCBCR_Y, YIQ_Y, conv2d, from_unit_float, pyiqa_y_channel, rgb2gray,
    round_half_away, to_uint8,
)
from banana100.metrics.native.matlab.filter import (
    conv2_same, filter2_same, fspecial_gaussian, gaussian_1d, imfilter, imfilter_integer, imfilter_moments_integer,
    imfilter_moments_separable, imfilter_near_separable, imfilter_separable, imfilter_symmetric_separable, pad_same,
    symmetric_index,
)
from banana100.metrics.native.matlab.resize import (
    imresize, imresize_half, pyiqa_cubic, pyiqa_imresize, pyiqa_resize_taps, resize_band, resize_matrix,
)

__all__ = [
    "CONV_STRIP_BYTES", "CPU_CONV_POLICY", "RGB2GRAY", "YCBCR_Y", "YIQ_Y", "conv2_same", "conv2d", "filter2_same",
    "from_unit_float", "fspecial_gaussian", "gaussian_1d", "imfilter", "imfilter_integer", "imfilter_moments_integer",
    "imfilter_moments_separable", "imfilter_near_separable", "imfilter_separable", "imfilter_symmetric_separable",
    "imresize", "imresize_half", "pad_same", "pyiqa_cubic", "pyiqa_imresize", "pyiqa_resize_taps", "pyiqa_y_channel",
    "resize_band", "resize_matrix", "rgb2gray", "round_half_away", "symmetric_index", "to_uint8",
]
