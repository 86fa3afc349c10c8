"""Native PIQE against pyiqa 0.1.16 (mode "pyiqa") and MATLAB's published scores (mode "official")."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch
from fixtures.nativetools import IMAGES, REFERENCE_IMAGES, image, load, missing_reason, rel
from PIL import Image

from banana100.metrics.engine.scorer import to_tensor
from banana100.metrics.native import piqe


@pytest.fixture(scope="module")
def pyiqa_piqe():
    import pyiqa

    torch.set_num_threads(2)
    return pyiqa.create_metric("piqe", device="cpu")


@pytest.fixture(scope="module")
def native_piqe():
    return piqe.build({}, mode="pyiqa")


@pytest.mark.integration
@pytest.mark.parametrize("path", IMAGES, ids=[p.name for p in IMAGES])
def test_matches_pyiqa_on_reference_images(path, pyiqa_piqe, native_piqe):
    x = load(path)
    assert rel(native_piqe(x), pyiqa_piqe(x)) < 1e-3


@pytest.mark.integration
def test_matches_pyiqa_on_odd_small_and_gray_images(pyiqa_piqe, native_piqe):
    pepper = image("pepper_0.png").clone()  # skips, naming the file, without ../shared
    image("I04.bmp")
    gray = to_tensor(np.asarray(Image.open(REFERENCE_IMAGES / "tid2013" / "I04.bmp").convert("L").convert("RGB")))[None]
    cases = {
        "97x131": pepper[..., 200:297, 150:281],
        "8x8 (smallest pyiqa scores)": pepper[..., 300:308, 300:308],
        "9x23": pepper[..., 300:309, 250:273],
        "17x40": pepper[..., 100:117, 100:140],
        "grayscale": gray,
    }
    for name, x in cases.items():
        assert rel(native_piqe(x), pyiqa_piqe(x)) < 1e-3, name


def test_batch_gives_each_image_its_own_score(native_piqe):
    a = image("I03.bmp").clone()
    b = image("I04.bmp").clone()
    batch = native_piqe(torch.cat([a, b]))
    assert batch.dtype == torch.float64 and batch.shape == (2,)
    assert torch.allclose(batch, torch.cat([native_piqe(a), native_piqe(b)]), rtol=1e-12, atol=0)


@pytest.mark.integration
def test_pyiqa_mode_refuses_what_pyiqa_cannot_score_and_official_does_not():
    x = torch.rand(1, 3, 7, 30)
    with pytest.raises(ValueError, match="at least 8x8"):
        piqe.build({}, mode="pyiqa")(x)
    assert piqe.build({}, mode="official")(x).isfinite().all()


def test_official_mode_matches_matlab_published_scores():
    if not (REFERENCE_IMAGES / "tid2013" / "official_scores.csv").is_file():
        pytest.skip(missing_reason("official_scores.csv") or "official_scores.csv not found")
    with open(REFERENCE_IMAGES / "tid2013" / "official_scores.csv") as f:
        rows = {r[0]: r[1:] for r in csv.reader(line for line in f if not line.startswith("#"))}
    header, published = rows["metric"], rows["piqe"]
    model = piqe.build({}, mode="official")
    for name, value in zip(header, published, strict=True):
        score = model(load(REFERENCE_IMAGES / "tid2013" / name)).item()
        assert abs(score - float(value)) / float(value) < 5e-3, (name, score, value)
        # published to two decimals
        assert round(score, 2) == float(value), (name, score, value)


def test_official_mode_pads_up_to_whole_blocks_with_the_border():
    """MATLAB pads (replicate, bottom/right) up to a multiple of 16 before the block loop."""
    x = image("pepper_1.png")[..., :100, :90].clone()
    padded = torch.nn.functional.pad(x, (0, 6, 0, 12), mode="replicate")
    model = piqe.build({}, mode="official")
    assert model(x).item() == model(padded).item()
