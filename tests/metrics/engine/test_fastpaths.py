"""The engine's faster forwards (banana100/metrics/engine/fastpaths.py) give pyiqa's scores bit for bit.

pyiqa's archs with random weights (banana100/testing/untrained.py), pyiqa's own forward against the
wrapper's on the same inputs, on each device of the `device` fixture; odd sizes included.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

pytest.importorskip("pyiqa")

from banana100.metrics.engine import fastpaths  # noqa: E402
from banana100.metrics.engine.scorer import MetricScorer  # noqa: E402
from banana100.testing.untrained import build_untrained  # noqa: E402


def _inputs(shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(shape, generator=g) for shape in shapes]


@pytest.fixture(scope="module")
def cnniqa(tmp_path_factory):
    return build_untrained("cnniqa", tmp_path_factory.mktemp("cnniqa"))


def test_cnniqa_fast_forward_is_pyiqa_bit_for_bit(cnniqa, device):
    model = cnniqa.to(device)
    fast = fastpaths.speed_up(model)
    assert isinstance(fast, fastpaths.FastCNNIQA) and fastpaths.original(fast) is model
    # odd sides, a non-square batch, the 7x7 kernel's smallest input, a larger image
    for x in _inputs([(1, 3, 7, 7), (3, 3, 37, 53), (2, 3, 101, 64), (1, 3, 333, 517)]):
        x = x.to(device)
        with torch.no_grad():
            want = model(x)
        got = fast(x)
        assert got.shape == want.shape == (x.shape[0], 1)
        assert torch.equal(got, want), (x.shape, (got - want).abs().max())


def test_cnniqa_pool_is_the_global_max_and_min(cnniqa):
    """What the fast path rests on: pyiqa's whole-image max_pool2d is amax, and -max_pool2d(-h) is amin."""
    h = cnniqa.net.conv1(_inputs([(2, 3, 45, 61)])[0]).detach()
    full = (h.size(-2), h.size(-1))
    assert torch.equal(nn.functional.max_pool2d(h, full).flatten(1), h.amax(dim=(-2, -1)))
    assert torch.equal((-nn.functional.max_pool2d(-h, full)).flatten(1), h.amin(dim=(-2, -1)))


def test_the_engine_scores_cnniqa_through_the_fast_path(cnniqa):
    import numpy as np

    scorer = MetricScorer.from_model("cnniqa", cnniqa, device="cpu")
    assert isinstance(scorer.model, fastpaths.FastCNNIQA)
    rng = np.random.default_rng(0)
    imgs = [rng.integers(0, 256, (40, 57, 3), dtype=np.uint8) for _ in range(3)]
    from banana100.metrics.engine.scorer import to_tensor

    with torch.no_grad():
        want = cnniqa(torch.stack([to_tensor(im) for im in imgs])).reshape(-1).tolist()
    assert scorer.score_arrays(imgs) == want  # the same batch through pyiqa's own forward


def test_other_models_come_back_unchanged(cnniqa):
    class Other(nn.Module):
        net = nn.Linear(1, 1)

    other = Other()
    assert fastpaths.speed_up(other) is other and fastpaths.original(other) is other
    plain = nn.Conv2d(3, 3, 1)  # no pyiqa `net` at all (the native modules)
    assert fastpaths.speed_up(plain) is plain
    cnniqa.as_loss = True  # pyiqa as a loss: gradients wanted, leave pyiqa's forward
    try:
        assert fastpaths.speed_up(cnniqa) is cnniqa
    finally:
        cnniqa.as_loss = False


# ViT-B/8 at 224 px on CPU: about 10 s a forward of two crops on 2 shared cores
@pytest.mark.slow
def test_maniqa_fast_forward_is_pyiqa_bit_for_bit(tmp_path):
    model = build_untrained("maniqa", tmp_path)  # 2 crops an image (the tests' cut-down count)
    fast = fastpaths.speed_up(model)
    assert isinstance(fast, fastpaths.FastMANIQA)
    # one batch of odd-size images larger than a crop, and one below 224 px (pyiqa upsamples it)
    for x in _inputs([(2, 3, 231, 259), (1, 3, 200, 230)]):
        with torch.no_grad():
            want = model(x)
        got = fast(x)
        assert got.shape == want.shape == (x.shape[0], 1)
        assert torch.equal(got, want), (x.shape, (got - want).abs().max())
        assert model.net.save_output.outputs == []  # pyiqa's hook list left empty, as its forward does


def test_untrained_real_crops_are_pyiqas_own_counts(tmp_path):
    """The GPU bench times hyperIQA, MANIQA and TReS at pyiqa's real crop counts, not the tests' cut-down ones."""
    assert build_untrained("hyperiqa", tmp_path).net.num_crop == 4
    assert build_untrained("hyperiqa", tmp_path, real_crops=True).net.num_crop == 25
