"""The GPU checks of bench/gpu/gpu_check.sh as tests, through the `device` fixture (conftest): on a
machine with CUDA, `pytest -m gpu` runs the cuda cases; elsewhere they skip, and the cpu cases
run in the fast tier. (Throughput and memory stay in bench/gpu/gpu_check.py: timings are not tests.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

from banana100.metrics.engine.scorer import MetricScorer

# small, quick archs with random weights (banana100/testing/untrained.py): the device plumbing, not the scores
DEEP = ("cnniqa",)


def _images(n: int = 3, side: int = 96, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (side, side + 16 * k, 3), dtype=np.uint8) for k in range(n)]


@pytest.mark.parametrize("name", DEEP)
def test_deep_metric_on_the_device_agrees_with_the_model_alone(device, name, tmp_path):
    """The scorer on `device` (batched by size, converted, uploaded) gives what the pyiqa model itself gives,
    one image at a time on the CPU. On "cpu" this checks the scorer's batching and conversion (it compared
    the CPU with the CPU before); on "cuda", the device too, within cuDNN's own kernels' error."""
    pytest.importorskip("pyiqa", reason="the deep metrics need the deep extra")
    import torch

    from banana100.metrics.engine.scorer import to_tensor
    from banana100.testing.untrained import build_untrained

    imgs = _images()
    model = build_untrained(name, tmp_path)
    with torch.inference_mode():  # the model alone, before the scorer moves it
        alone = [float(model(to_tensor(a)[None].to(next(model.parameters()).device))) for a in imgs]
    on_device = MetricScorer.from_model(name, model, device=device, batch_size=2).score_arrays(imgs)
    assert {p.device.type for p in model.parameters()} == {device}
    assert all(math.isfinite(s) for s in on_device) and len(set(alone)) == len(alone)  # three distinct scores
    if device == "cpu":
        np.testing.assert_allclose(on_device, alone, rtol=1e-6, atol=1e-6)
    else:  # cuDNN picks its own kernels (TF32 for float32 convolutions by default)
        np.testing.assert_allclose(on_device, alone, rtol=1e-2, atol=1e-3)
