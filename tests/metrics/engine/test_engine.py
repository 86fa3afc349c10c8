"""The scoring engine: equal to pyiqa, batching, input kinds, minimum sizes.

Uses the real parameter files in ../shared/iqa-params (never copied into the repository).
pyiqa's IL-NIQE takes seconds an image (BENCHMARKS.md, "Metrics"), so only its cheap checks run by default.
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from banana100.metrics.engine.scorer import MetricScorer, check_size, to_tensor
from banana100.errors import ImageReadError, ImageTooSmallError, WeightsNotFoundError
from banana100.metrics.table import get_metric

from fixtures.repopaths import SHARED
PARAMS = SHARED / "iqa-params"
REF = SHARED / "reference-images"
CLASSICAL = ("piqe", "niqe", "brisque", "ilniqe")
FAST = ("piqe", "niqe", "brisque")

from conftest import shared_missing  # noqa: E402

pytestmark = pytest.mark.skipif(bool(shared_missing(PARAMS, REF)), reason=shared_missing(PARAMS, REF) or "-")


@pytest.fixture(autouse=True)
def _weights(weights_from_shared):
    """Parameter files from ../shared/iqa-params (offline and private caches: conftest)."""


_SCORERS: dict[tuple[str, int], MetricScorer] = {}


def scorer(name: str, batch_size: int = 8) -> MetricScorer:
    """One CPU scorer per (metric, batch size) for the whole module (building one is cheap, but why).

    The pyiqa backend: this file checks the engine's own work (reading, batching, sizes) by exact
    equality with pyiqa; the native backend's agreement is tested in tests/test_native_*.py.
    """
    key = (name, batch_size)
    if key not in _SCORERS:
        _SCORERS[key] = MetricScorer(name, device="cpu", batch_size=batch_size, backend="pyiqa")
    return _SCORERS[key]


def rgb(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


@pytest.fixture(scope="module")
def same_size_images() -> list[np.ndarray]:
    """Seven different 384x512 images (three TID2013/LIVE images, four peppers cropped)."""
    imgs = [rgb(REF / "tid2013" / "I03.bmp"), rgb(REF / "tid2013" / "I04.bmp"), rgb(REF / "piq" / "I01.BMP")]
    imgs += [rgb(REF / "ilniqe" / f"pepper_{i}.png")[:384, :512] for i in (0, 1, 2, 4)]
    assert {a.shape for a in imgs} == {(384, 512, 3)}
    return imgs


@pytest.fixture(scope="module")
def mixed_images(same_size_images) -> list[np.ndarray]:
    """Same-size images interleaved with two other sizes, so groups and order both matter."""
    a, b, c, d, e, f, g = same_size_images
    return [a, b[:200, :300], c, d[:200, :300].copy(), e, f[100:300, 50:350], g, a[:130, :250]]


# -- equal to pyiqa ----------------------------------------------------------------------


@pytest.mark.integration
def test_to_tensor_is_bitwise_pyiqa_file_path(same_size_images):
    import torchvision.transforms.functional as TF

    for a in same_size_images[:3]:
        assert torch.equal(to_tensor(a), TF.to_tensor(Image.fromarray(a)))


@pytest.mark.integration
@pytest.mark.parametrize("name", FAST)
def test_scores_equal_pyiqa_on_files(name):
    import pyiqa

    files = [REF / "tid2013" / "I03.bmp", REF / "tid2013" / "I04.bmp"]
    spec = get_metric(name)
    kwargs = {spec.path_kwarg: str(PARAMS / spec.backend_files("pyiqa")[0].filename)} if spec.all_files else {}
    ref = pyiqa.create_metric(name, device="cpu", **kwargs)
    expected = [float(ref(str(p))) for p in files]
    assert scorer(name).score(files) == expected


@pytest.mark.integration
def test_pyiqa_never_downloads(monkeypatch):
    """The engine hands pyiqa the local file, so pyiqa's own downloader is never called, and the models hold
    what the local files say (an engine that let pyiqa fetch its own copy, or build without one, fails here)."""
    import scipy.io
    import torch
    from pyiqa.archs import brisque_arch, niqe_arch

    asked = []
    monkeypatch.setattr(niqe_arch, "load_file_from_url", lambda *a, **k: asked.append(a) or a[0])
    monkeypatch.setattr(brisque_arch, "load_file_from_url", lambda *a, **k: asked.append(a) or a[0])
    nets = {name: MetricScorer(name, device="cpu", backend="pyiqa").model for name in ("niqe", "ilniqe", "brisque")}
    nets = {name: getattr(m, "net", m) for name, m in nets.items()}
    assert asked == []
    mat = scipy.io.loadmat(str(PARAMS / "niqe_modelparameters.mat"))
    assert torch.allclose(nets["niqe"].mu_pris_param.double().flatten(), torch.from_numpy(mat["mu_prisparam"]).flatten())
    assert nets["ilniqe"].pretrained_model_path.endswith("ILNIQE_templateModel.mat")
    sv_coef, sv = torch.load(PARAMS / "brisque_svm_weights.pth", map_location="cpu", weights_only=False)
    assert torch.equal(nets["brisque"].sv_coef.cpu(), sv_coef) and torch.equal(nets["brisque"].sv.cpu(), sv)


def test_missing_weights_raise_before_pyiqa(monkeypatch):
    monkeypatch.delenv("BANANA100_WEIGHTS")
    for backend in ("native", "pyiqa"):
        with pytest.raises(WeightsNotFoundError, match="niqe_modelparameters.mat"):
            MetricScorer("niqe", device="cpu", backend=backend)


def test_returns_python_floats_in_order(mixed_images):
    s = scorer("niqe").score(mixed_images[:3])
    assert all(type(v) is float for v in s)
    assert s == [scorer("niqe", 1).score([a])[0] for a in mixed_images[:3]]


# -- batching -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["piqe", "niqe"])
def test_batched_equals_one_at_a_time(name, mixed_images):
    one = scorer(name, batch_size=1).score(mixed_images)
    for bs in (3, 8):
        assert scorer(name, batch_size=bs).score(mixed_images) == one  # exactly, in input order


def test_batches_group_same_size_images(mixed_images):
    chunks = scorer("piqe", batch_size=3)._chunks([a.shape[:2] for a in mixed_images])
    assert sorted(i for c in chunks for i in c) == list(range(len(mixed_images)))
    for c in chunks:
        assert len(c) <= 3 and len({mixed_images[i].shape for i in c}) == 1
    assert max(len(c) for c in chunks) == 3


@pytest.mark.parametrize("name", ["brisque", "ilniqe"])
def test_unbatchable_metrics_score_one_at_a_time(name, mixed_images):
    """BRISQUE's float32 SVR sum and IL-NIQE's float64 pipeline change with the batch size
    (by up to ~0.01 and ~1e-7 respectively), so the table marks them not batchable."""
    assert not get_metric(name).batchable
    assert all(len(c) == 1 for c in scorer(name, batch_size=8)._chunks([a.shape[:2] for a in mixed_images]))


@pytest.mark.integration
def test_brisque_one_at_a_time_equals_pyiqa_per_image(mixed_images):
    import pyiqa

    ref = pyiqa.create_metric("brisque", device="cpu", pretrained_model_path=str(PARAMS / "brisque_svm_weights.pth"))
    expected = [float(ref(torch.stack([to_tensor(a)]))) for a in mixed_images]
    assert scorer("brisque", batch_size=8).score(mixed_images) == expected


# -- minimum sizes ------------------------------------------------------------------------


def crop(h: int, w: int) -> np.ndarray:
    return np.ascontiguousarray(rgb(REF / "tid2013" / "I04.bmp")[50 : 50 + h, 100 : 100 + w])


@pytest.mark.parametrize("name", CLASSICAL)
def test_too_small_names_image_and_minimum(name):
    m = get_metric(name).min_size
    for h, w in ((m - 1, m + 20), (m + 20, m - 1)):
        with pytest.raises(ImageTooSmallError) as exc:
            scorer(name).score([crop(h, w)])
        msg = str(exc.value)
        assert f"{get_metric(name).display_name} needs at least {m}x{m} pixels" in msg
        assert f"is {w}x{h}" in msg and f"({h}, {w}, 3)" in msg


def test_too_small_message_for_a_file(tmp_path):
    path = tmp_path / "small.png"
    Image.fromarray(crop(80, 64)).save(path)
    with pytest.raises(ImageTooSmallError, match=r"NIQE needs at least 96x96 pixels; .*small\.png is 64x80"):
        scorer("niqe").score([path])


def test_too_small_is_checked_before_any_scoring(monkeypatch):
    s = scorer("piqe")
    monkeypatch.setattr(s, "_forward_device", lambda x, p: pytest.fail("scored before checking sizes"))
    with pytest.raises(ImageTooSmallError):
        s.score([crop(100, 100), crop(4, 4)])


@pytest.mark.integration
@pytest.mark.parametrize("name", FAST)
def test_minimum_is_pyiqas_real_minimum(name):
    """pyiqa scores an image of exactly its accepted minimum and fails one pixel below it; the
    engine's minimum (the smallest meaningful size, bench/metrics/bench_min_size.py) is not below that."""
    import pyiqa

    spec = get_metric(name)
    m = spec.accepted_min_size
    assert spec.min_size >= m
    kwargs = {spec.path_kwarg: str(PARAMS / spec.backend_files("pyiqa")[0].filename)} if spec.all_files else {}
    raw = pyiqa.create_metric(name, device="cpu", **kwargs)
    for h, w in ((m, m), (m, 300), (300, m)):
        raw(torch.stack([to_tensor(crop(h, w))]))  # no exception
    for h, w in ((m - 1, m - 1), (m - 1, 300), (300, m - 1)):
        with pytest.raises((RuntimeError, IndexError)):  # unfold / interpolate / indexing errors
            raw(torch.stack([to_tensor(crop(h, w))]))
    assert math.isfinite(scorer(name).score([crop(spec.min_size, spec.min_size)])[0])


def test_ilniqe_minimum_check_is_cheap():
    spec = get_metric("ilniqe")
    m = spec.min_size
    check_size(spec, crop(m, m), "x")
    with pytest.raises(ImageTooSmallError, match=f"IL-NIQE needs at least {m}x{m} pixels"):
        check_size(spec, crop(m - 1, 300), "x")


@pytest.mark.integration
@pytest.mark.slow
def test_ilniqe_minimum_is_pyiqas_real_minimum():
    """IL-NIQE resizes to 524x524: 2 px raise IndexError, 4 px fail in the SVD, 5 px score."""
    import pyiqa

    raw = pyiqa.create_metric("ilniqe", device="cpu", pretrained_model_path=str(PARAMS / "ILNIQE_templateModel.mat"))
    assert math.isfinite(float(raw(torch.stack([to_tensor(crop(5, 5))]))))
    for s in (2, 4):
        with pytest.raises((RuntimeError, IndexError)):  # IndexError; torch linalg error
            raw(torch.stack([to_tensor(crop(s, s))]))


# -- input kinds --------------------------------------------------------------------------


def test_paths_pil_bytes_and_arrays_score_equal(tmp_path):
    a = crop(200, 260)
    path = tmp_path / "img.png"
    Image.fromarray(a).save(path)
    inputs = [str(path), path, path.read_bytes(), Image.open(path), Image.fromarray(a), a]
    for name in FAST:
        s = scorer(name).score(inputs)
        assert len(set(s)) == 1, (name, s)
        assert s[:1] == scorer(name).score_arrays([a])


@pytest.mark.integration
def test_grayscale_is_replicated_like_pyiqa(tmp_path):
    import pyiqa

    gray = np.asarray(Image.fromarray(crop(200, 260)).convert("L"))
    path = tmp_path / "gray.png"
    Image.fromarray(gray).save(path)
    three = np.repeat(gray[:, :, None], 3, axis=2)
    ref = pyiqa.create_metric("niqe", device="cpu", pretrained_model_path=str(PARAMS / "niqe_modelparameters.mat"))
    s = scorer("niqe").score([path, gray, gray[:, :, None], three])
    assert len(set(s)) == 1
    assert s[0] == float(ref(str(path)))


@pytest.mark.integration
def test_goldhill_gif_grayscale_file_equals_pyiqa():
    import pyiqa

    path = REF / "piq" / "goldhill.gif"
    assert Image.open(path).mode in ("L", "P")
    ref = pyiqa.create_metric("brisque", device="cpu", pretrained_model_path=str(PARAMS / "brisque_svm_weights.pth"))
    assert scorer("brisque").score([path]) == [float(ref(str(path)))]


@pytest.mark.integration
def test_rgba_drops_alpha_like_pyiqa(tmp_path):
    import pyiqa

    a = crop(200, 260)
    alpha = np.linspace(0, 255, a.shape[0] * a.shape[1]).reshape(a.shape[:2]).astype(np.uint8)
    rgba = np.dstack([a, alpha])
    path = tmp_path / "rgba.png"
    Image.fromarray(rgba, "RGBA").save(path)
    ref = pyiqa.create_metric("piqe", device="cpu")
    s = scorer("piqe").score([path, rgba, Image.open(path), a])
    assert len(set(s)) == 1  # alpha dropped, no compositing
    assert s[0] == float(ref(str(path)))


@pytest.mark.integration
def test_16bit_png_uses_the_high_byte(tmp_path):
    import cv2
    import pyiqa

    a8 = crop(200, 260)
    a16 = (a8.astype(np.uint16) << 8) | 0x5A  # low byte is noise that must be ignored
    rgb_path = tmp_path / "rgb16.png"
    assert cv2.imwrite(str(rgb_path), a16[:, :, ::-1].copy())  # OpenCV writes BGR, 16 bits
    gray16 = (np.asarray(Image.fromarray(a8).convert("L")).astype(np.uint16) << 8) | 0x33
    gray_path = tmp_path / "gray16.png"
    assert cv2.imwrite(str(gray_path), gray16)
    assert Image.open(gray_path).mode.startswith("I")

    s = scorer("niqe")
    # 16-bit RGB: PIL (and so pyiqa) reads the high byte; we match pyiqa exactly.
    ref = pyiqa.create_metric("niqe", device="cpu", pretrained_model_path=str(PARAMS / "niqe_modelparameters.mat"))
    assert s.score([rgb_path]) == s.score([a8]) == s.score([a16]) == [float(ref(str(rgb_path)))]
    # 16-bit grayscale: high byte too (plain pyiqa would clip it to white; see imageio).
    g8 = (gray16 >> 8).astype(np.uint8)
    assert s.score([gray_path]) == s.score([g8]) == s.score([gray16])


def test_bad_inputs(tmp_path):
    with pytest.raises(ImageReadError, match="no such file"):
        scorer("piqe").score([tmp_path / "nope.png"])
    with pytest.raises(ImageReadError, match="HxWx3 uint8"):
        scorer("piqe").score_arrays([crop(50, 50).astype(np.float32)])
    with pytest.raises(ImageReadError):
        scorer("piqe").score([io.BytesIO(b"x")])



def _save_all(folder: Path, arrays: list[np.ndarray]) -> list[Path]:
    paths = []
    for i, a in enumerate(arrays):
        paths.append(folder / f"img_{i}.png")
        Image.fromarray(a).save(paths[-1])
    return paths


def test_files_decoded_ahead_score_like_arrays_in_input_order(tmp_path, mixed_images):
    """Decoding overlaps scoring (a few batches ahead, in threads); order and values must not change."""
    paths = _save_all(tmp_path, mixed_images * 3)
    s = scorer("piqe", batch_size=2)
    assert s.score(paths) == s.score_arrays(mixed_images * 3)


def test_unreadable_file_fails_before_any_scoring(tmp_path, mixed_images, monkeypatch):
    paths = _save_all(tmp_path, mixed_images[:3])
    (tmp_path / "notes.png").write_text("not an image")
    s = scorer("piqe")
    monkeypatch.setattr(s, "_forward_device", lambda x, p: pytest.fail("scored before reading every header"))
    with pytest.raises(ImageReadError, match="notes.png: not an image file"):
        s.score(paths + [tmp_path / "notes.png"])
    with pytest.raises(ImageTooSmallError, match="tiny.png"):
        Image.fromarray(crop(4, 4)).save(tmp_path / "tiny.png")
        s.score(paths + [tmp_path / "tiny.png"])


def test_truncated_file_is_named_and_the_other_scores_kept(tmp_path, mixed_images):
    """The header is fine, the pixel data is cut: found only when decoding, after scoring began."""
    paths = _save_all(tmp_path, mixed_images[:4])
    data = paths[1].read_bytes()
    paths[1].write_bytes(data[: len(data) // 2])
    s = scorer("piqe", batch_size=1)
    with pytest.raises(ImageReadError, match=r"1 of 4 images could not be decoded \(.*img_1.png: corrupt or truncated") as err:
        s.score(paths)
    expected = s.score_arrays([mixed_images[i] for i in (0, 2, 3)])
    assert err.value.scores == [expected[0], None, expected[1], expected[2]]

def test_device_and_batch_size(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    s = MetricScorer("piqe")
    assert s.device == torch.device("cpu") and s.batch_size == 8
    with pytest.raises(ValueError):
        MetricScorer("piqe", device="cpu", batch_size=0)
    assert scorer("piqe").score([]) == []


@pytest.mark.integration
def test_files_without_a_path_argument_are_linked_into_pyiqas_cache(monkeypatch, tmp_path):
    """For archs that only read pyiqa's cache (no path keyword), the engine links the file there."""
    from pyiqa.utils import download_util

    from banana100.metrics.weights import stage_in_pyiqa_cache

    cache = tmp_path / "pyiqa-cache"
    monkeypatch.setattr(download_util, "DEFAULT_CACHE_DIR", str(cache))
    src = PARAMS / "niqe_modelparameters.mat"
    (cache).mkdir()
    (cache / "ILNIQE_templateModel.mat").symlink_to(tmp_path / "gone")  # a dangling link is replaced
    stage_in_pyiqa_cache([src, PARAMS / "ILNIQE_templateModel.mat"])
    stage_in_pyiqa_cache([src])  # idempotent
    assert (cache / src.name).resolve() == src.resolve()
    assert (cache / "ILNIQE_templateModel.mat").resolve() == (PARAMS / "ILNIQE_templateModel.mat").resolve()


class _OOMAbove(torch.nn.Module):
    """Scores the mean pixel; raises CUDA's out-of-memory error for batches above `limit`."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.sizes = limit, []

    def forward(self, x):
        self.sizes.append(x.shape[0])
        if x.shape[0] > self.limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return x.mean(dim=(1, 2, 3))


def test_out_of_memory_halves_the_batch_and_keeps_the_order():
    imgs = [np.full((8, 8, 3), v, np.uint8) for v in range(10)]
    model = _OOMAbove(limit=2)
    s = MetricScorer.from_model("cnniqa", model, device="cpu", batch_size=8)
    with pytest.warns(RuntimeWarning, match="batch_size lowered"):
        scores = s.score_arrays(imgs)
    np.testing.assert_allclose(scores, [v / 255 for v in range(10)], rtol=1e-6)
    assert s.batch_size == 2  # remembered for the next call
    model.sizes.clear()
    s.score_arrays(imgs)
    assert max(model.sizes) == 2


def test_out_of_memory_on_one_image_is_raised():
    s = MetricScorer.from_model("cnniqa", _OOMAbove(limit=0), device="cpu", batch_size=4)
    with pytest.raises(torch.cuda.OutOfMemoryError), pytest.warns(RuntimeWarning, match="batch_size lowered"):
        s.score_arrays([np.zeros((8, 8, 3), np.uint8)] * 3)


def test_other_errors_are_not_retried():
    class Broken(torch.nn.Module):
        calls = 0

        def forward(self, x):
            Broken.calls += 1
            raise ValueError("bad input")

    s = MetricScorer.from_model("cnniqa", Broken(), device="cpu", batch_size=4)
    with pytest.raises(ValueError):
        s.score_arrays([np.zeros((8, 8, 3), np.uint8)] * 4)
    assert Broken.calls == 1


# -- half precision -------------------------------------------------------------------------


class _Conv(torch.nn.Module):
    """A small conv net: under float16 autocast its conv runs in half precision."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.dtypes = []

    def forward(self, x):
        y = self.conv(x)
        self.dtypes.append(y.dtype)
        return y.mean(dim=(1, 2, 3))


def test_half_is_refused_until_the_table_states_a_measured_tolerance():
    assert get_metric("cnniqa").half_tolerance is None
    with pytest.raises(ValueError, match="python -m bench.gpu.gpu_check --half"):
        MetricScorer.from_model("cnniqa", _Conv(), device="cpu").allow_half()


def test_half_runs_the_forward_under_float16_autocast(monkeypatch):
    import dataclasses

    model = _Conv()
    s = MetricScorer.from_model("cnniqa", model, device="cpu", batch_size=4)
    imgs = [crop(40, 50), crop(40, 50)[::-1].copy()]
    full = s.score_arrays(imgs)
    s.spec = dataclasses.replace(s.spec, half_tolerance=0.01)  # as if measured
    s.allow_half()
    half = s.score_arrays(imgs)
    assert model.dtypes == [torch.float32, torch.float16]
    assert all(type(v) is float for v in half)
    np.testing.assert_allclose(half, full, atol=1e-2)
    assert half != full and "half=True" in repr(s)


_FAULTS_SCRIPT = """
import json, resource, sys
import numpy as np
from banana100.metrics.engine.scorer import MetricScorer, keep_freed_memory
rng = np.random.default_rng(0)
images = [rng.integers(0, 256, (512, 512, 3), dtype=np.uint8) for _ in range(8)]
scorer = MetricScorer("piqe", device="cpu", batch_size=1)
scorer.score_arrays(images)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
scorer.score_arrays(images)
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / len(images)
print(json.dumps({"tuned": keep_freed_memory(), "faults": faults}))
"""


def _faults_per_image(tuning: str) -> dict:
    import json
    import subprocess
    import sys

    env = dict(os.environ, BANANA100_MALLOC_TUNING=tuning)
    out = subprocess.run([sys.executable, "-c", _FAULTS_SCRIPT], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not Path("/lib/x86_64-linux-gnu/libc.so.6").exists() and not Path("/lib64/libc.so.6").exists(),
                    reason="the allocator settings are for glibc")
@pytest.mark.integration  # a process measuring page faults (~5 s)
def test_engine_keeps_freed_memory_so_images_do_not_page_fault_afresh():
    """A 512 px image's tensors are ~20 MiB; glibc's defaults page-faulted ~9,000 4 KiB pages back in per image."""
    tuned = _faults_per_image("1")
    assert tuned["tuned"] is True
    assert tuned["faults"] < 500, tuned
    untouched = _faults_per_image("0")
    assert untouched["tuned"] is False
