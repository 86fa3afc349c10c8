"""Plumbing of the deep metrics, without their real weights.

Each arch is built by pyiqa with random weights (see banana100/testing/untrained.py: nothing is downloaded)
and run through the engine: one score per image, batched scores equal one-at-a-time scores,
the model sits on the requested device. With no files at hand, building a scorer raises
WeightsNotFoundError naming the missing file. Tests marked `needs_weights` compare with pyiqa
on real checkpoints and run wherever `banana100 weights check <metric>` passes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from banana100.metrics import weights
from banana100.metrics.engine.scorer import MetricScorer
from banana100.metrics.weights import files_in_place
from banana100.errors import WeightsNotFoundError
from banana100.metrics.table import ROSTER, WeightFile, get_metric

from banana100.testing.untrained import CANNOT_BUILD, UNTRAINED_KWARGS, build_untrained

DEEP = [m for m in ROSTER if get_metric(m).family != "hand-crafted"]
from fixtures.repopaths import REFERENCE_IMAGES

REFERENCE = REFERENCE_IMAGES / "tid2013"


@pytest.fixture(autouse=True)
def offline(request, monkeypatch, tmp_path):
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    if request.node.get_closest_marker("needs_weights") is None:  # those see the user's folder (conftest)
        monkeypatch.delenv(weights.ENV_VAR, raising=False)
    return tmp_path


def images_for(name: str, n: int = 3) -> list[np.ndarray]:
    """n same-size random images at least as large as the metric needs, plus one of another size."""
    side = max(get_metric(name).min_size, 48)
    rng = np.random.default_rng(1)
    same = [rng.integers(0, 256, (side, side + 16, 3), dtype=np.uint8) for _ in range(n)]
    return same + [rng.integers(0, 256, (side + 8, side, 3), dtype=np.uint8)]


def test_every_deep_metric_is_covered():
    assert set(UNTRAINED_KWARGS) | set(CANNOT_BUILD) == set(DEEP) | {"nrqm", "pi"}


# Over ~20 s each on 2 CPU cores (ViT-B/8, 224-px crops, 299-px Inception): `pytest -m slow`.
HEAVY = {"maniqa", "tres", "nima", "hyperiqa"}


@pytest.mark.parametrize("name", sorted(HEAVY))
def test_heavy_untrained_archs_build_offline(name, tmp_path):
    model = build_untrained(name, tmp_path)
    assert not model.net.training
    assert {p.device.type for p in model.parameters()} == {"cpu"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in sorted(UNTRAINED_KWARGS)]
)
def test_untrained_arch_scores_batches_like_single_images(name, tmp_path):
    model = build_untrained(name, tmp_path)
    assert not model.net.training  # pyiqa puts the arch in eval mode
    assert {p.device.type for p in model.parameters()} <= {"cpu"}
    imgs = images_for(name)
    batched = MetricScorer.from_model(name, model, device="cpu", batch_size=3)
    assert batched._chunks([a.shape[:2] for a in imgs]) == ([[0, 1, 2], [3]] if get_metric(name).batchable else [[0], [1], [2], [3]])
    scores = batched.score_arrays(imgs)
    assert len(scores) == len(imgs) and all(isinstance(s, float) and math.isfinite(s) for s in scores)
    single = MetricScorer.from_model(name, model, device="cpu", batch_size=1).score_arrays(imgs)
    np.testing.assert_allclose(scores, single, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", DEEP + ["nrqm", "pi"])
def test_missing_weights_name_the_file(name, offline):
    """One error names every missing file of the metric (checkpoint and backbone), on one line."""
    files = get_metric(name).files
    with pytest.raises(WeightsNotFoundError) as exc:
        MetricScorer(name, device="cpu")
    msg = str(exc.value)
    assert all(wf.filename in msg and wf.download_url in msg for wf in files)
    assert (f"$BANANA100_WEIGHTS/{files[0].filename}" if len(files) == 1 else "$BANANA100_WEIGHTS") in msg
    assert "HF_HUB_OFFLINE=1" in msg and "\n" not in msg


@pytest.mark.parametrize("name", [m for m in DEEP if len(get_metric(m).files) > 1])
def test_a_missing_backbone_is_named_too(name, monkeypatch, tmp_path):
    """Checkpoint present, backbone absent: the error names the backbone and its own cache."""
    files = get_metric(name).files
    folder = tmp_path / "w"
    folder.mkdir()
    present = [wf for wf in files[:-1] if wf.sha256 is None and wf.sha256_prefix is None]
    if len(present) != len(files) - 1:
        pytest.skip("an earlier file is checksummed; a fake cannot stand in for it")
    for wf in present:
        (folder / wf.filename).write_bytes(b"fake")
    monkeypatch.setenv(weights.ENV_VAR, str(folder))
    last = files[-1]
    with pytest.raises(WeightsNotFoundError) as exc:
        MetricScorer(name, device="cpu")
    msg = str(exc.value)
    assert last.filename in msg and last.download_url in msg
    assert not any(f"{wf.filename} (needed" in msg for wf in present)
    cache = weights.cache_dir(last)
    if cache is not None:
        assert str(cache / last.filename) in msg


@pytest.mark.integration
def test_files_are_put_where_each_library_looks(tmp_path, monkeypatch):
    """pyiqa / torchvision / CLIP files are linked into their caches; timm gets the file via its config."""
    import timm

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    from pyiqa.utils import download_util

    monkeypatch.setattr(download_util, "DEFAULT_CACHE_DIR", str(tmp_path / "th" / "hub" / "pyiqa"))
    src = tmp_path / "src"
    src.mkdir()
    for n in ("a.pth", "resnet18-f37072fd.pth", "RN50.pt"):
        (src / n).write_bytes(b"x")
    model = timm.create_model("resnet18", pretrained=False)
    sd = {k: torch.full_like(v, 0.25) if v.is_floating_point() else v for k, v in model.state_dict().items()}
    import safetensors.torch

    safetensors.torch.save_file(sd, str(src / "resnet18.a1_in1k.safetensors"))
    pairs = [
        (WeightFile("a.pth"), src / "a.pth"),
        (WeightFile("resnet18-f37072fd.pth", repo_id=None, cache="torch"), src / "resnet18-f37072fd.pth"),
        (WeightFile("RN50.pt", repo_id=None, cache="clip"), src / "RN50.pt"),
        (WeightFile("resnet18.a1_in1k.safetensors", repo_id="timm/resnet18.a1_in1k", cache="hf", timm_name="resnet18"),
         src / "resnet18.a1_in1k.safetensors"),
    ]
    with files_in_place(pairs):
        loaded = timm.create_model("resnet18", pretrained=True, features_only=True)
    hub = tmp_path / "th" / "hub"
    assert (hub / "pyiqa" / "a.pth").resolve() == (src / "a.pth").resolve()
    assert (hub / "checkpoints" / "resnet18-f37072fd.pth").resolve() == (src / "resnet18-f37072fd.pth").resolve()
    assert (hub / "clip" / "RN50.pt").resolve() == (src / "RN50.pt").resolve()
    assert torch.all(next(iter(loaded.state_dict().values())) == 0.25)
    assert timm.create_model.__module__.startswith("timm")  # the patch is gone after the block


# -- with the real weights (wherever they are) --------------------------------------------------


@pytest.mark.integration
@pytest.mark.needs_weights
@pytest.mark.parametrize("name", DEEP + ["nrqm", "pi"])
def test_scores_equal_pyiqa_with_real_weights(name):
    if weights.missing(name):
        pytest.skip(f"{name}: missing {', '.join(weights.missing(name))} (banana100 weights check {name})")
    import pyiqa

    paths = sorted(REFERENCE.glob("*.bmp"))[:2] or sorted(REFERENCE.glob("*"))[:2]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    ours = MetricScorer(name, device=device, batch_size=2).score(paths)
    ref_model = pyiqa.create_metric(name, device=device)
    theirs = [float(ref_model(str(p)).reshape(-1)[0]) for p in paths]
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
