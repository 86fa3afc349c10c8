"""Native IL-NIQE against pyiqa 0.1.16 (mode "pyiqa") and the MATLAB release's published scores (mode "official").

pyiqa's IL-NIQE takes seconds an image (BENCHMARKS.md, "Metrics"), so the integration tier compares it live on three
images (a 128 px pepper that is blown up 4x, an odd-size grayscale crop, a 7x6 image); the other
reference images and crops (5x5 included) are marked slow. The official-mode checks are cheap and
all run.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
from fixtures.nativetools import REFERENCE_IMAGES, load, rel
from PIL import Image

from banana100.metrics.engine.scorer import to_tensor
from banana100.metrics.native import build, ilniqe

PEPPERS = REFERENCE_IMAGES / "ilniqe"
TID = REFERENCE_IMAGES / "tid2013"

from conftest import shared_missing  # noqa: E402

pytestmark = pytest.mark.skipif(bool(shared_missing(REFERENCE_IMAGES)), reason=shared_missing(REFERENCE_IMAGES) or "-")


def gray(path: Path) -> torch.Tensor:
    return to_tensor(np.asarray(Image.open(path).convert("L").convert("RGB")))[None]


def published_official() -> dict[str, float]:
    """MATLAB release scores: the peppers' README column and tid2013's `ilniqe` row."""
    with open(PEPPERS / "official_scores.csv") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    scores = {r["image"]: float(r["ilniqe_official_mat_matlab"]) for r in rows}
    with open(TID / "official_scores.csv") as f:
        table = {r[0]: r[1:] for r in csv.reader(line for line in f if not line.startswith("#"))}
    scores.update({name: float(v) for name, v in zip(table["metric"], table["ilniqe"], strict=True)})
    return scores


@pytest.fixture(scope="module")
def files():
    path = REFERENCE_IMAGES.parent / "iqa-params" / ilniqe.PARAM_FILE
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return {ilniqe.PARAM_FILE: path}


@pytest.fixture(scope="module")
def native_pyiqa(files):
    return build("ilniqe", files, mode="pyiqa")


@pytest.fixture(scope="module")
def native_official(files):
    return build("ilniqe", files, mode="official")


@pytest.fixture(scope="module")
def pyiqa_ilniqe(files):
    import pyiqa

    return pyiqa.create_metric("ilniqe", pretrained_model_path=str(files[ilniqe.PARAM_FILE]), device="cpu")


PEPPER = load(PEPPERS / "pepper_0.png") if PEPPERS.is_dir() else None
LIVE_CASES = {
    # 128 px blown up to 524: where pyiqa (float resize) and MATLAB (uint8 resize) differ most
    "pepper_3": lambda: load(PEPPERS / "pepper_3.png"),
    "gray 97x131": lambda: gray(TID / "I04.bmp")[..., 100:197, 200:331],
    "7x6": lambda: PEPPER[..., 300:307, 100:106],
}
SLOW_CASES = {
    **{f"pepper_{i}": (lambda i=i: load(PEPPERS / f"pepper_{i}.png")) for i in (0, 1, 2, 4)},
    "I03": lambda: load(TID / "I03.bmp"),
    "I04": lambda: load(TID / "I04.bmp"),
    "colour 97x131": lambda: PEPPER[..., 100:197, 50:181],
    # the smallest size pyiqa scores; slow in pyiqa: its Weibull fit runs all 50 iterations on NaN
    "5x5": lambda: PEPPER[..., 200:205, 200:205],
}


@pytest.mark.integration
@pytest.mark.parametrize("case", list(LIVE_CASES))
def test_matches_pyiqa(case, native_pyiqa, pyiqa_ilniqe):
    x = LIVE_CASES[case]()
    assert rel(native_pyiqa(x), pyiqa_ilniqe(x)) < 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("case", list(SLOW_CASES))
def test_matches_pyiqa_slow(case, native_pyiqa, pyiqa_ilniqe):
    x = SLOW_CASES[case]()
    assert rel(native_pyiqa(x), pyiqa_ilniqe(x)) < 1e-3


@pytest.mark.integration
def test_official_mode_matches_matlab_release(native_official):
    published = published_official()
    names = ["pepper_0.png", "pepper_1.png", "pepper_2.png", "pepper_4.png"]  # 512x512: one batch
    batch = torch.cat([load(PEPPERS / n) for n in names])
    scores = dict(zip(names, native_official(batch).tolist(), strict=True))
    scores["pepper_3.png"] = native_official(load(PEPPERS / "pepper_3.png")).item()
    scores.update(zip(["I03.bmp", "I04.bmp"], native_official(torch.cat([load(TID / "I03.bmp"), load(TID / "I04.bmp")])).tolist(), strict=True))
    assert set(scores) == set(published)
    for name, value in published.items():
        assert abs(scores[name] - value) / value < 0.005, (name, scores[name], value)


@pytest.mark.integration  # IL-NIQE on a batch (~15 s)
def test_batch_gives_each_image_its_own_score(native_pyiqa):
    # pyiqa stops its Weibull iterations on the whole batch; the native module decides per image
    a = PEPPER[..., :64, :80]
    b = PEPPER[..., 300:364, 200:280].flip(-1)
    batch = native_pyiqa(torch.cat([a, b]))
    assert batch.dtype == torch.float64 and batch.shape == (2,)
    assert torch.allclose(batch, torch.cat([native_pyiqa(a), native_pyiqa(b)]), rtol=1e-9, atol=0)


def test_refuses_images_below_5_pixels(native_pyiqa):
    with pytest.raises(ValueError, match="at least 5x5"):
        native_pyiqa(PEPPER[..., :4, :40])


def test_malformed_template_names_the_file(tmp_path):
    bad = tmp_path / ilniqe.PARAM_FILE
    scipy.io.savemat(bad, {"templateModel": np.zeros((1, 3))})
    with pytest.raises(ValueError, match=ilniqe.PARAM_FILE):
        build("ilniqe", {ilniqe.PARAM_FILE: bad})


def test_weibull_fit_is_the_maximum_likelihood_one():
    # MATLAB's wblfit is the MLE: the profile-likelihood equation holds at the fitted shape
    torch.manual_seed(0)
    x = torch.distributions.Weibull(torch.tensor(2.5), torch.tensor(1.7)).sample((3, 1, 2, 4000)).double()
    shape, scale = ilniqe.weibull_mle(x)
    xk = x ** shape.unsqueeze(-1)
    log_x = x.log()
    equation = (xk * log_x).sum(-1) / xk.sum(-1) - 1 / shape - log_x.mean(-1)
    assert equation.abs().max() < 1e-10
    assert torch.allclose(scale, xk.mean(-1) ** (1 / shape), rtol=1e-12)
