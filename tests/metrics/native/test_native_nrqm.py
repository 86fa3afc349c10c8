"""Native NRQM and PI against pyiqa 0.1.16 and the published original scores.

NRQM_model.mat (the trained forests) is not on the build machines, so the two stages are
checked apart: the 138 features against pyiqa's own feature functions on the same input, and
the regression (reader + batched tree walk) end to end against pyiqa with a synthetic model
file of the same layout, written here. With the real file at hand (`needs_weights`), the final
scores are compared with pyiqa and with the published TID2013 values.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
from fixtures.nativetools import IMAGES, REFERENCE_IMAGES, image, load, rel
from banana100.testing.nrqm_reference import pyiqa_nrqm_features as pyiqa_features
from PIL import Image

from banana100.metrics.engine.scorer import to_tensor
from banana100.metrics.native import nrqm, pi
from banana100.errors import ParameterFileError

NIQE_FILE = "niqe_modelparameters.mat"


def published(metric: str) -> dict[str, float]:
    with open(REFERENCE_IMAGES / "tid2013" / "official_scores.csv") as f:
        rows = {r[0]: r[1:] for r in csv.reader(line for line in f if not line.startswith("#"))}
    return {name: float(v) for name, v in zip(rows["metric"], rows[metric], strict=True)}


@pytest.fixture(scope="module", autouse=True)
def two_threads():
    torch.set_num_threads(2)


@pytest.fixture(scope="module")
def feature_model() -> nrqm.NRQM:
    """A native NRQM without forests: enough for `features`."""
    return nrqm.NRQM(np.zeros(4), [], mode="pyiqa")


@pytest.fixture(scope="module")
def pepper() -> torch.Tensor:
    return image("pepper_0.png").clone()  # skips, naming the file, without ../shared


# -- feature stage -----------------------------------------------------------------------------


@pytest.mark.integration
def test_features_match_pyiqa_on_odd_thin_small_and_gray_images(feature_model, pepper):
    image("I04.bmp")  # skips, naming the file, without ../shared
    gray = to_tensor(np.asarray(Image.open(REFERENCE_IMAGES / "tid2013" / "I04.bmp").convert("L").convert("RGB")))[None]
    cases = {
        "97x131": pepper[..., 200:297, 150:281],
        "84x84 (smallest square)": pepper[..., 300:384, 300:384],
        "45x200 (thinnest)": pepper[..., 100:145, 100:300],
        "grayscale 100x120": gray[..., 50:150, 200:320],
    }
    for name, x in cases.items():
        ours = feature_model.features(feature_model.luminance(x))
        theirs = pyiqa_features(x)
        for group, (a, b) in enumerate(zip(ours, theirs, strict=True), start=1):
            assert a.shape == b.shape == (1, (18, 45, 75)[group - 1]), (name, group)
            if group == 3:  # singular values, 25 per pyramid level: a float32 SVD's error is absolute, so
                # the near-zero ones are compared on their level's scale (LAPACK builds differ by ~1e-3
                # relative on those; the level's largest value agrees to ~1e-5)
                for level in range(3):
                    lv = slice(25 * level, 25 * (level + 1))
                    err = ((a[0, lv] - b[0, lv]).abs().max() / b[0, lv].abs().max()).item()
                    assert err < 1e-4, (name, f"f3 level {level}", err)
            else:  # f2: GGD shapes picked on pyiqa's 0.001 grid from GSM-denoised subbands (an eigh and a
                # solve per block); with numpy 2.4 / scipy 1.17 the 84x84 crop moves by 3.0e-3 (2.375 vs
                # 2.368), where it held 1e-3 before: bound 5e-3, the other groups and crops 1e-3
                bound = 5e-3 if group == 2 else 1e-3
                assert rel(a, b) < bound, (name, f"f{group}", rel(a, b))


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("path", IMAGES, ids=[p.name for p in IMAGES])
def test_features_match_pyiqa_on_reference_images(path, feature_model):
    x = load(path)
    ours = feature_model.features(feature_model.luminance(x))
    for group, (a, b) in enumerate(zip(ours, pyiqa_features(x), strict=True), start=1):
        assert rel(a, b) < 1e-3, (f"f{group}", rel(a, b))


def test_features_of_a_batch_are_those_of_each_image(feature_model, pepper):
    a, b = pepper[..., :90, :100], pepper[..., 200:290, 300:400]
    batch = feature_model.features(feature_model.luminance(torch.cat([a, b])))
    for i, single in enumerate((a, b)):
        for group, one in zip(batch, feature_model.features(feature_model.luminance(single)), strict=True):
            torch.testing.assert_close(group[i : i + 1], one, rtol=1e-10, atol=1e-12)


def test_too_small_images_are_refused(feature_model, pepper):
    for h, w in ((44, 200), (80, 80)):  # 80x80 leaves 16 5x5 blocks at quarter size, not 25
        with pytest.raises(ValueError, match="NRQM needs"):
            feature_model.features(feature_model.luminance(pepper[..., :h, :w]))


# -- regression stage: a synthetic NRQM_model.mat --------------------------------------------


def random_tree(rng, thresholds_from: np.ndarray, max_depth: int) -> list[list]:
    """One randomforest-matlab tree (lDau, rDau, upper, avnode, mbest; 1-based), unbalanced,
    split thresholds halfway between two samples' values so that samples part ways."""
    left, right, upper, value, feature, depth = [0], [0], [0.0], [rng.normal(5, 2)], [0], [0]
    node = 0
    while node < len(left):
        if depth[node] < max_depth and (depth[node] < 2 or rng.random() < 0.7):
            f = int(rng.integers(thresholds_from.shape[1]))
            a, b = rng.choice(thresholds_from.shape[0], 2, replace=False)
            feature[node], upper[node] = f + 1, (thresholds_from[a, f] + thresholds_from[b, f]) / 2
            left[node], right[node] = len(left) + 1, len(left) + 2
            for _ in range(2):
                left.append(0), right.append(0), upper.append(0.0), value.append(rng.normal(5, 2)), feature.append(0)
                depth.append(depth[node] + 1)
        node += 1
    return [left, right, upper, value, feature]


def write_synthetic_model(path: Path, feature_samples, seed: int = 0, trees: int = 9, max_depth: int = 7) -> None:
    """NRQM_model.mat in the original's layout: model.linear (4x1), model.rf{1..3} structs whose
    fields pyiqa reads by position (lDau, rDau, nodestatus, nrnodes, upper, avnode, mbest, ...)."""
    rng = np.random.default_rng(seed)
    rf = np.empty((1, 3), dtype=object)
    for k, samples in enumerate(feature_samples):
        built = [random_tree(rng, samples, max_depth) for _ in range(trees)]
        nodes = max(len(t[0]) for t in built) + 3  # unused rows at the end, as regRF leaves them
        arrays = [np.zeros((nodes, trees)) for _ in range(5)]
        for t, tree in enumerate(built):
            for array, column in zip(arrays, tree, strict=True):
                array[: len(column), t] = column
        left, right, upper, value, feature = arrays
        rf[0, k] = {
            "lDau": left.astype(np.int32), "rDau": right.astype(np.int32),
            "nodestatus": np.where(left > 0, -3, -1).astype(np.int32), "nrnodes": np.array([[nodes]]),
            "upper": upper, "avnode": value, "mbest": feature.astype(np.int32),
            "ndtree": np.full((1, trees), nodes), "ntree": np.array([[trees]]),
        }
    scipy.io.savemat(str(path), {"model": {"linear": np.array([[1.5], [0.4], [0.3], [0.2]]), "rf": rf}})


@pytest.fixture(scope="module")
def nrqm_images(pepper) -> torch.Tensor:
    tid = [image(n).clone() for n in ("I03.bmp", "I04.bmp")]
    return torch.cat([im[..., 100:212, 60:180] for im in (pepper, *tid)])  # 112x120: PI's NIQE fits


@pytest.fixture(scope="module")
def synthetic_files(tmp_path_factory, feature_model, nrqm_images, iqa_params_module) -> dict[str, Path]:
    """A synthetic NRQM_model.mat whose splits fall among the test images' features (as NRQM
    and as PI sees them), next to the real NIQE parameters."""
    shaved = pi.PI(feature_model, None, mode="pyiqa").luminance(nrqm_images)
    samples = [torch.cat(groups).numpy() for groups in zip(
        feature_model.features(feature_model.luminance(nrqm_images)), feature_model.features(shaved), strict=True)]
    path = tmp_path_factory.mktemp("nrqm") / "NRQM_model.mat"
    write_synthetic_model(path, samples)
    return {"NRQM_model.mat": path, NIQE_FILE: iqa_params_module / NIQE_FILE}


@pytest.fixture(scope="module")
def iqa_params_module() -> Path:
    folder = REFERENCE_IMAGES.parent / "iqa-params"
    if not (folder / NIQE_FILE).is_file():
        pytest.skip(f"parameter files not found in {folder}")
    return folder


@pytest.mark.integration
def test_forest_walk_matches_pyiqa_including_ties(tmp_path):
    import pyiqa.archs.nrqm_arch as arch

    rng = np.random.default_rng(3)
    samples = [rng.normal(size=(30, n)) for n in (18, 45, 75)]
    write_synthetic_model(tmp_path / "m.mat", samples, seed=4)
    _, forests = nrqm.read_nrqm_mat(tmp_path / "m.mat")
    theirs = arch.NRQM(pretrained_model_path=str(tmp_path / "m.mat")).rf_params_list
    for forest, params, feats in zip(forests, theirs, samples, strict=True):
        x = torch.from_numpy(np.concatenate([feats, rng.normal(size=(20, feats.shape[1]))]))
        x[0, forest.feature[0, 0] - 1] = forest.threshold[0, 0]  # on the threshold: goes left
        expected = arch.random_forest_regression(x, *params).squeeze(1)
        torch.testing.assert_close(nrqm.ForestRegressor(forest)(x), expected, rtol=0, atol=1e-12)


def test_reader_names_what_is_wrong(tmp_path):
    scipy.io.savemat(str(tmp_path / "other.mat"), {"weights": np.zeros(3)})
    with pytest.raises(ParameterFileError, match="not an NRQM model"):
        nrqm.read_nrqm_mat(tmp_path / "other.mat")
    with pytest.raises(ParameterFileError, match="not found"):
        nrqm.read_nrqm_mat(tmp_path / "absent.mat")


@pytest.mark.integration
def test_nrqm_with_a_synthetic_model_matches_pyiqa(synthetic_files, nrqm_images):
    import pyiqa.archs.nrqm_arch as arch

    reference = arch.NRQM(pretrained_model_path=str(synthetic_files["NRQM_model.mat"]))
    expected = torch.stack([reference(nrqm_images[i : i + 1]) for i in range(len(nrqm_images))])
    ours = nrqm.build(synthetic_files, mode="pyiqa")(nrqm_images)
    assert ours.dtype == torch.float64 and ours.shape == (len(nrqm_images),)
    assert rel(ours, expected) < 1e-3
    assert expected.unique().numel() == len(nrqm_images)  # the forests tell the images apart


@pytest.mark.integration
def test_pi_with_a_synthetic_model_matches_pyiqa(synthetic_files, nrqm_images, monkeypatch):
    import pyiqa.archs.nrqm_arch as arch
    from pyiqa.archs import niqe_arch

    # pyiqa's PI takes no paths: hand its two parts our files where they would download
    monkeypatch.setattr(arch, "load_file_from_url", lambda *a, **k: str(synthetic_files["NRQM_model.mat"]))
    monkeypatch.setattr(niqe_arch, "load_file_from_url", lambda *a, **k: str(synthetic_files[NIQE_FILE]))
    reference = arch.PI()
    images = nrqm_images[1:]
    expected = torch.stack([reference(images[i : i + 1]) for i in range(len(images))])
    assert rel(pi.build(synthetic_files, mode="pyiqa")(images), expected) < 1e-3


def test_official_modes_run_on_matlab_luma(synthetic_files, nrqm_images):
    """Official NRQM reads MATLAB rgb2gray, official PI MATLAB rgb2ycbcr: same features otherwise."""
    x = nrqm_images[:1]
    official = nrqm.build(synthetic_files, mode="official")
    assert official.luminance(x).sub(nrqm.build(synthetic_files, mode="pyiqa").luminance(x)).abs().max() <= 1
    scores = pi.build(synthetic_files, mode="official")(nrqm_images)
    assert scores.isfinite().all() and scores.shape == (len(nrqm_images),)


# -- with the real NRQM_model.mat -------------------------------------------------------------


@pytest.fixture
def real_files() -> dict[str, Path]:  # the needs_weights folders: conftest
    from banana100.metrics import weights

    absent = weights.missing("pi")
    if absent:
        pytest.skip(f"missing {', '.join(absent)} (put it in $BANANA100_WEIGHTS or ../shared/iqa-params)")
    return {wf.filename: path for wf, path in weights.resolved_files("pi", allow_download=False)}


@pytest.mark.integration
@pytest.mark.needs_weights
@pytest.mark.parametrize("metric", ["nrqm", "pi"])
def test_real_model_matches_pyiqa_and_published_scores(metric, real_files):
    from banana100.metrics.engine.scorer import MetricScorer

    module = {"nrqm": nrqm, "pi": pi}[metric]
    names = ("I03.bmp", "I04.bmp")
    x = torch.cat([load(REFERENCE_IMAGES / "tid2013" / n) for n in names])
    rgb = [np.asarray(Image.open(REFERENCE_IMAGES / "tid2013" / n).convert("RGB")) for n in names]
    expected = MetricScorer(metric, device="cpu", backend="pyiqa").score_arrays(rgb)
    assert rel(module.build(real_files, mode="pyiqa")(x), torch.tensor(expected)) < 1e-3
    official = module.build(real_files, mode="official")(x)
    for score, name in zip(official.tolist(), names, strict=True):
        target = published(metric)[name]
        assert abs(score - target) / abs(target) < 5e-3, (metric, name, score, target)
