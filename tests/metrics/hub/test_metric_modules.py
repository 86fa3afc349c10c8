"""The evaluate modules in metrics/<name>/: loading, output, inputs, the fast path and the fallback."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import datasets
import evaluate
import numpy as np
import pytest
from PIL import Image

import banana100.metrics.hub.module as em
from banana100.errors import WeightsNotFoundError
from banana100.metrics.table import ROSTER, get_metric

from fixtures.repopaths import REPO
SHARED = REPO.parent / "shared"
PARAMS = SHARED / "iqa-params"
REF = SHARED / "reference-images"
# every roster metric: pyiqa id -> the class name in metrics/<id>/<id>.py
MODULES = {n: "".join(w.capitalize() for w in n.split("_")) for n in ROSTER}
FAST = ("piqe", "niqe", "brisque")
KEYS = {"metric", "scores", "mean", "lower_better"}

from conftest import shared_missing  # noqa: E402

pytestmark = pytest.mark.skipif(bool(shared_missing(PARAMS, REF)), reason=shared_missing(PARAMS, REF) or "-")


@pytest.fixture(autouse=True)
def _weights_and_repo_root(weights_from_shared, monkeypatch):
    """Parameter files from ../shared/iqa-params; cwd = repository root (offline: conftest)."""
    monkeypatch.chdir(REPO)


_LOADED: dict[str, evaluate.EvaluationModule] = {}


def load(name: str) -> evaluate.EvaluationModule:
    if name not in _LOADED:
        _LOADED[name] = evaluate.load(f"metrics/{name}")
    return _LOADED[name]


def rgb(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


I03 = REF / "tid2013" / "I03.bmp"
I04 = REF / "tid2013" / "I04.bmp"


# -- loading -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(MODULES))
def test_load_finds_the_metric_class(name):
    m = load(name)
    assert type(m).__name__ == MODULES[name]
    assert isinstance(m, em.IQAMetric) and m.METRIC_NAME == name
    assert m.name == name
    spec = get_metric(name)
    assert m.citation == spec.citation
    assert spec.display_name in m.description and spec.direction in m.description
    assert list(m.features) == ["images"] and isinstance(m.features["images"], datasets.Image)


def test_base_class_is_abstract_so_evaluate_skips_it():
    assert inspect.isabstract(em.IQAMetric)
    with pytest.raises(TypeError):
        em.IQAMetric()


@pytest.mark.parametrize("name", list(MODULES))
def test_module_file_imports_installed_library_only(name):
    from evaluate.loading import get_imports

    path = REPO / "metrics" / name / f"{name}.py"
    imports = get_imports(str(path))
    from banana100.extras import requirement
    from banana100.metrics.hub.publish import metric_extras

    # one library import, no relative / local ones; its `# From:` comment is evaluate's pip hint
    assert imports == [("library", "banana100", f'"{requirement(metric_extras(name))}"', None)]
    assert "from banana100.metrics.module import" not in path.read_text()


def test_module_importing_the_base_by_name_still_loads_its_own_class(tmp_path):
    """Even the import we warn about works: IQAMetric is abstract, so evaluate skips it."""
    folder = tmp_path / "niqe_by_name"
    folder.mkdir()
    (folder / "niqe_by_name.py").write_text(
        "from banana100.metrics.module import IQAMetric\n\n\nclass NiqeByName(IQAMetric):\n    METRIC_NAME = 'niqe'\n"
    )
    m = evaluate.load(str(folder))
    assert type(m).__name__ == "NiqeByName"


def test_a_copied_folder_works_alone(tmp_path):
    """What a Hub push of metrics/niqe contains (module + card) loads outside the repository."""
    shutil.copytree(REPO / "metrics" / "niqe", tmp_path / "niqe")
    m = evaluate.load(str(tmp_path / "niqe"))
    assert m.compute(images=[str(I04)])["scores"] == load("niqe").compute(images=[str(I04)])["scores"]


@pytest.mark.parametrize("name", ["topiq_nr", "clipiqa"])
def test_a_copied_deep_metric_folder_loads_and_names_its_missing_file(name, tmp_path, monkeypatch):
    """Pushed to the Hub and loaded on a machine without the checkpoint: the error says what to fetch."""
    monkeypatch.delenv("BANANA100_WEIGHTS")
    shutil.copytree(REPO / "metrics" / name, tmp_path / name)
    m = evaluate.load(str(tmp_path / name))
    assert m.METRIC_NAME == name
    first = get_metric(name).backend_files()[0].filename
    with pytest.raises(WeightsNotFoundError, match=first.replace(".", r"\.")):
        m.compute(images=[np.zeros((64, 64, 3), np.uint8)], device="cpu")


# -- compute ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FAST)
def test_output_dict(name):
    out = load(name).compute(images=[str(I03), str(I04)])
    # the contract's keys; the native hand-crafted metrics add flat_share (issue 12)
    assert set(out) == KEYS | ({"flat_share"} if get_metric(name).native else set())
    if "flat_share" in out:
        assert len(out["flat_share"]) == 2 and all(0 <= s <= 1 for s in out["flat_share"])
    assert out["metric"] == name
    assert out["lower_better"] is get_metric(name).lower_better
    assert len(out["scores"]) == 2 and all(type(s) is float for s in out["scores"])
    assert type(out["mean"]) is float and out["mean"] == pytest.approx(np.mean(out["scores"]))


@pytest.mark.parametrize("name", FAST)
def test_pil_path_and_array_inputs_agree(name):
    m = load(name)
    by_path = m.compute(images=[str(I03), I04])["scores"]
    by_pil = m.compute(images=[Image.open(I03), Image.open(I04)])["scores"]
    by_array = m.compute(images=[rgb(I03), rgb(I04)])["scores"]
    assert by_path == by_pil == by_array


def test_single_image_and_batch_array():
    m = load("piqe")
    one = m.compute(images=str(I04))["scores"]
    assert one == m.compute(images=[str(I04)])["scores"]
    stacked = np.stack([rgb(I03), rgb(I04)])
    assert m.compute(images=stacked)["scores"] == m.compute(images=[str(I03), str(I04)])["scores"]


def test_device_and_batch_size_keywords_and_scorer_cache():
    m = load("niqe")
    a = m.compute(images=[str(I03), str(I04)], device="cpu", batch_size=1)
    b = m.compute(images=[str(I03), str(I04)], device="cpu", batch_size=2)
    c = m.compute(images=[str(I03), str(I04)], device="cpu", batch_size=2)
    assert a == b == c
    assert set(m._scorers) >= {("cpu", 1, "native", "pyiqa", False, "exact"), ("cpu", 2, "native", "pyiqa", False, "exact")}
    assert len([k for k in m._scorers if k[:2] == ("cpu", 2)]) == 1


@pytest.mark.integration
def test_backend_and_mode_keywords():
    import pyiqa

    m = load("niqe")
    native = m.compute(images=[str(I03)], device="cpu")["scores"][0]
    by_pyiqa = m.compute(images=[str(I03)], device="cpu", backend="pyiqa")["scores"][0]
    official = m.compute(images=[str(I03)], device="cpu", mode="official")["scores"][0]
    raw = pyiqa.create_metric("niqe", device="cpu", pretrained_model_path=str(PARAMS / "niqe_modelparameters.mat"))
    assert by_pyiqa == float(raw(str(I03)))
    assert native != by_pyiqa and abs(native - by_pyiqa) / by_pyiqa < 1e-3
    assert abs(official - 15.7536293917814) / 15.7536293917814 < 5e-3  # LIVE MATLAB on I03; pyiqa is -0.62 %
    with pytest.raises(ValueError, match="backend must be one of"):
        load("cnniqa").compute(images=[str(I03)], device="cpu", backend="native")
    with pytest.raises(TypeError, match="compute takes images, device, batch_size, backend, mode, precision, half"):
        m.compute(images=[str(I03)], quality="high")


def test_empty_input_is_an_error():
    with pytest.raises(ValueError, match="no images"):
        load("piqe").compute(images=[])


# -- the fast path and the fallback ---------------------------------------------------------


@pytest.fixture
def encode_spy(monkeypatch):
    """Counts calls of datasets' Image.encode_example (evaluate's per-image PNG encoding)."""
    calls = []
    original = datasets.Image.encode_example

    def spy(self, value):
        calls.append(type(value).__name__)
        return original(self, value)

    monkeypatch.setattr(datasets.Image, "encode_example", spy)
    return calls


def test_compute_with_images_skips_evaluate_encoding(encode_spy, monkeypatch):
    m = load("niqe")
    monkeypatch.setattr(m, "add_batch", lambda **kw: pytest.fail("add_batch called on the direct path"))
    out = m.compute(images=[Image.open(I03), rgb(I04), str(I04)])
    assert len(out["scores"]) == 3
    assert encode_spy == []  # no per-image encoding
    assert m.writer is None and m.cache_file_name is None  # no Arrow cache file either


def test_add_batch_fallback_equals_direct(encode_spy):
    m = load("niqe")
    direct = m.compute(images=[str(I03), rgb(I04), Image.open(I04)])
    m.add_batch(images=[str(I03), rgb(I04)])
    m.add(images=Image.open(I04))
    fallback = m.compute()
    assert encode_spy  # the spy sees evaluate's usual path
    assert fallback == direct
    # after the fallback the module is clean again: the fast path works
    assert m.compute(images=[str(I03)])["scores"] == direct["scores"][:1]


def test_compute_with_images_after_add_batch_scores_both():
    """evaluate's semantics: compute(images=...) after add_batch scores the stored images too."""
    m = load("piqe")
    m.add_batch(images=[str(I03)])
    out = m.compute(images=[str(I04)])
    assert out["scores"] == m.compute(images=[str(I03), str(I04)])["scores"]


def test_compute_without_anything_added_is_evaluates_error():
    with pytest.raises(ValueError, match="add"):
        load("piqe").compute()


def test_unknown_keyword_is_an_error():
    with pytest.raises(TypeError, match="predictions"):
        load("piqe").compute(images=[str(I04)], predictions=[1])


def test_a_datasets_image_column_can_be_passed(tmp_path):
    ds = datasets.Dataset.from_dict({"image": [str(I03), str(I04)]}).cast_column("image", datasets.Image())
    m = load("piqe")
    expected = m.compute(images=[str(I03), str(I04)])["scores"]
    assert m.compute(images=ds["image"])["scores"] == expected
    raw = ds.cast_column("image", datasets.Image(decode=False))
    assert m.compute(images=raw["image"])["scores"] == expected  # {"bytes", "path"} dicts
