"""pyiqa's NRQM feature stage, the reference the native NRQM / PI features are checked and timed
against (tests/metrics/native/test_native_nrqm.py, bench/metrics/bench_nrqm_features.py, bench/metrics/nrqm_flat_features.py).
Needs pyiqa (the deep extra)."""

from __future__ import annotations

import torch


def pyiqa_nrqm_features(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """pyiqa's NRQM feature stage (the body of `pyiqa.archs.nrqm_arch.nrqm` before the forests)."""
    import pyiqa.archs.nrqm_arch as arch
    from pyiqa.matlab_utils import im2col
    from pyiqa.utils.color_util import to_y_channel

    img = to_y_channel(x, 255, "yiq").double()
    levels = arch.get_gauss_pyramid(img / 255.0)
    f1 = torch.cat([arch.block_dct(level) for level in levels], dim=1)
    f2 = arch.global_gsm(img)
    f3 = torch.cat([torch.linalg.svd(im2col(level, 5, "distinct"), full_matrices=False)[1] for level in levels], 1)
    return f1, f2, f3
