"""The native metrics against pyiqa's stored scores (tests/fixtures/data/pyiqa_reference_scores.json):
the fidelity promise of each card, |native - pyiqa| <= rtol * max(|pyiqa|, floor), checked in
the fast tier without pyiqa. The integration tier recomputes pyiqa and checks that the stored
values are still its scores (a new pyiqa release that moves them shows up there)."""

from __future__ import annotations

import math

import pytest
import torch
from fixtures.repopaths import PARAMS as IQA_PARAMS
from fixtures.referencedata import (BRISQUE_FLOAT64, NATIVE_FILES, STORED, TOLERANCE, images, keys_for, pyiqa_scores,
                           stored, tolerance)

from banana100.metrics import native

SCORES = stored()["scores"]
PLATFORM = stored().get("platform")  # the CPU the scores were stored on (None: not recorded)


@pytest.fixture(scope="module")
def imgs():
    return images()


def _params(metric: str):
    if NATIVE_FILES[metric] and not all((IQA_PARAMS / f).is_file() for f in NATIVE_FILES[metric]):
        pytest.skip(f"{', '.join(NATIVE_FILES[metric])} not found in {IQA_PARAMS} (the read-only ../shared folder)")
    return IQA_PARAMS


def _far(ours, theirs, metric: str, device: str = "cpu") -> bool:
    if isinstance(ours, dict) or isinstance(theirs, dict):
        return ours != theirs
    if ours is None or theirs is None:
        return (ours is None) != (theirs is None)
    # a GPU is another platform than the stored CPU's, whatever its CPU
    rtol, floor = tolerance(metric, PLATFORM if device == "cpu" else None)
    return abs(ours - theirs) > rtol * max(abs(theirs), floor)


def _slow_ilniqe(metrics):
    return [pytest.param(m, marks=pytest.mark.integration) if m == "ilniqe" else m for m in metrics]


# On CUDA the images without flat windows: there pyiqa's own leftovers, and so its scores, depend
# on the convolution backend (bench/gpu/gpu_flat_check.py measures by how much); the CPU repair
# follows pyiqa's CPU arithmetic.
NOT_FLAT = ("snapshot/0", "snapshot/1", "snapshot/2", "snapshot/10", "tid2013/I03.bmp", "tid2013/I04.bmp",
            "piq/I01.BMP")


@pytest.mark.parametrize("metric", _slow_ilniqe(TOLERANCE))
def test_native_scores_keep_their_promise_against_stored_pyiqa_scores(imgs, metric, device):
    params = _params(metric)
    model = native.build(metric, {f: params / f for f in NATIVE_FILES[metric]}, "pyiqa").to(device)
    # images pyiqa raises on have no score to match (the degenerate-input tests cover them)
    keys = [k for k in keys_for(metric, imgs) if k in SCORES[metric] and not isinstance(SCORES[metric][k], dict)
            and (device == "cpu" or k in NOT_FLAT)]
    assert len(keys) >= (2 if metric == "ilniqe" or device != "cpu" else 9), f"too few stored {metric} scores in {STORED}"
    far = {}
    for key in keys:
        with torch.no_grad():
            v = float(model(imgs[key].to(device)).reshape(-1)[0])
        ours = None if math.isnan(v) else v
        if _far(ours, SCORES[metric][key], metric, device) and (
                metric != "brisque" or _far(ours, SCORES[BRISQUE_FLOAT64][key], metric, device)):
            far[key] = (ours, SCORES[metric][key])
    assert not far, f"{metric}: native far from pyiqa's stored score on {far}"


@pytest.mark.integration
@pytest.mark.parametrize("metric", list(TOLERANCE))
def test_stored_scores_are_still_pyiqas(imgs, metric):
    pytest.importorskip("pyiqa", reason="pyiqa (the deep extra) not installed")
    now = pyiqa_scores(metric, _params(metric) if NATIVE_FILES[metric] else IQA_PARAMS, imgs)
    moved = {k: (SCORES[metric].get(k), v) for k, v in now.items() if _far(v, SCORES[metric].get(k), metric)}
    assert not moved, (f"pyiqa's {metric} moved from the stored scores (rerun python tests/fixtures/regenerate_reference_data.py"
                       f" pyiqa if the new release is right): {moved}")
