"""Degenerate inputs, as a hostile user would try them: uniform images, tiny crops, decompression
bombs and other unreadable files, through the evaluate modules, the engine and `banana100 score`.

No NaN ever comes back as a score: a uniform image gets its metric's documented value (PIQE: 100)
or a ScoreUndefinedError naming it, the other images kept; an image below the metric's smallest
meaningful size is an ImageTooSmallError; every read failure is an ImageReadError naming the file.
The hand-crafted metrics run for real with the parameter files of ../shared/iqa-params (skipped,
naming them, where absent); NRQM and PI need NRQM_model.mat (skipped, naming it, where absent).
"""

from __future__ import annotations

import math
import re
import struct
import warnings
import zlib
from pathlib import Path

import evaluate
import numpy as np
import pyarrow.parquet as pq

import pytest
import torch
from PIL import Image, ImageFile

import banana100.imageio as imageio
from banana100 import scoring
from banana100.metrics.engine.scorer import MetricScorer
from banana100.errors import ImageReadError, ImageTooSmallError, ScoreUndefinedError
from banana100.imageio import encode_png, image_size, load_rgb
from banana100.chains.manifest import ManifestWriter, sha256_bytes
from banana100.metrics.table import ROSTER, get_metric

from fixtures.repopaths import REPO
REAL = ("piqe", "niqe", "brisque", "ilniqe")  # hand-crafted metrics whose files are in ../shared/iqa-params
GREYS = (0, 1, 128, 254, 255)
SIDE = 128


def uniform_images(side: int = SIDE) -> list[np.ndarray]:
    """Uniform images at several grey levels and one uniform colour."""
    return [np.full((side, side, 3), g, np.uint8) for g in GREYS] + [np.full((side, side, 3), (255, 0, 0), np.uint8)]


def natural(h: int = SIDE, w: int | None = None, y: int = 100, x: int = 150) -> np.ndarray:
    """A crop of a natural photograph bundled with scikit-image."""
    import skimage.data

    return np.ascontiguousarray(skimage.data.astronaut()[y : y + h, x : x + (w or h)])


_MODULES: dict[str, evaluate.EvaluationModule] = {}


def module(name: str) -> evaluate.EvaluationModule:
    if name not in _MODULES:
        _MODULES[name] = evaluate.load(str(REPO / "metrics" / name))
    return _MODULES[name]


@pytest.fixture
def files(request):
    """PIQE needs no file; the others read ../shared/iqa-params (skipped, naming the files, without it)."""
    if request.node.callspec.params["name"] != "piqe":
        request.getfixturevalue("weights_from_shared")


@pytest.fixture(autouse=True)
def two_threads():
    torch.set_num_threads(2)


# -- uniform images ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["native", "pyiqa"])
@pytest.mark.parametrize("name", REAL)
def test_uniform_images_get_the_documented_value_or_a_named_error(name, backend, files):
    spec = get_metric(name)
    nat = natural()
    images = uniform_images() + [nat]
    run_natural = not (name == "ilniqe" and backend == "pyiqa")  # pyiqa's IL-NIQE: ~10 s an image
    if not run_natural:
        images = images[:-1]
    m = module(name)
    if spec.uniform == "undefined":
        with pytest.raises(ScoreUndefinedError, match=f"{len(GREYS) + 1} of {len(images)} images have no") as err:
            m.compute(images=images, device="cpu", backend=backend)
        assert sorted(err.value.errors) == list(range(len(GREYS) + 1))
        for i, e in err.value.errors.items():
            assert isinstance(e, ScoreUndefinedError)
            assert f"image {i} " in str(e) and "uniform image" in str(e)
        assert err.value.scores[: len(GREYS) + 1] == [None] * (len(GREYS) + 1)
        if run_natural:  # the natural image was scored as it is alone
            alone = m.compute(images=[nat], device="cpu", backend=backend)["scores"][0]
            assert err.value.scores[-1] == pytest.approx(alone, rel=1e-9)
    else:
        out = m.compute(images=images, device="cpu", backend=backend)
        assert out["scores"][: len(GREYS) + 1] == [spec.uniform] * (len(GREYS) + 1)
        assert all(math.isfinite(s) for s in out["scores"]) and math.isfinite(out["mean"])


def _nrqm_standin(path: Path) -> None:
    """A stand-in NRQM_model.mat in the original layout (model.linear, model.rf{1..3}: randomforest-matlab
    structs read by field position) whose three forests are one leaf each (5.0): the real feature stage runs
    on every image, and a forest answers a constant. The uniform-image policy is decided before the forests
    (the feature statistics need variation), so it is tested whole; a score's value is not."""
    import scipy.io

    leaf = {"lDau": np.zeros((1, 1)), "rDau": np.zeros((1, 1)), "nodestatus": np.zeros((1, 1)),
            "bestvar": np.zeros((1, 1)), "upper": np.zeros((1, 1)), "avnode": np.full((1, 1), 5.0),
            "mbest": np.ones((1, 1))}
    forests = np.empty((1, 3), dtype=object)
    for i in range(3):
        forests[0, i] = leaf
    scipy.io.savemat(str(path), {"model": {"linear": np.array([[0.0, 0.5, 0.3, 0.2]]), "rf": forests}})


@pytest.mark.parametrize("name", ["nrqm", "pi"])
def test_nrqm_and_pi_uniform_images_are_undefined(name, weights_from_shared, tmp_path, monkeypatch):
    """Issue 44: this always skipped where NRQM_model.mat is absent (../shared has none). The real file when
    present, else a stand-in of it (`_nrqm_standin`) beside ../shared's NIQE parameters (PI = NRQM and NIQE)."""
    from banana100.metrics.native import nrqm

    if not (weights_from_shared / nrqm.PARAM_FILE).is_file():
        folder = tmp_path / "weights"
        folder.mkdir()
        for f in weights_from_shared.iterdir():
            (folder / f.name).symlink_to(f)
        _nrqm_standin(folder / nrqm.PARAM_FILE)
        monkeypatch.setenv("BANANA100_WEIGHTS", str(folder))
    scorer = MetricScorer(name, device="cpu")
    nat = natural()
    with pytest.raises(ScoreUndefinedError) as err:
        scorer.score(uniform_images() + [nat])
    assert sorted(err.value.errors) == list(range(len(GREYS) + 1))
    assert all("uniform image" in str(e) for e in err.value.errors.values())
    assert math.isfinite(err.value.scores[-1])
    assert scorer.score([nat])[0] == pytest.approx(err.value.scores[-1], rel=1e-9)  # as it scores alone


@pytest.mark.parametrize("name", ROSTER)
def test_every_metric_applies_its_uniform_policy_before_the_model(name):
    """The table's `uniform` for every roster metric: a stand-in model records what it is given."""
    spec = get_metric(name)
    seen: list[float] = []

    class Recorder(torch.nn.Module):
        def forward(self, x):
            seen.extend(x.flatten(1).std(dim=1).tolist())
            return x.mean(dim=(1, 2, 3))

    side = max(spec.min_size, 32)
    scorer = MetricScorer.from_model(name, Recorder(), device="cpu")
    flat, nat = np.full((side, side, 3), 77, np.uint8), natural(side)
    if spec.uniform == "scored":  # deep metrics: the network scores a uniform image like any other
        assert scorer.score([flat, nat]) == pytest.approx([77 / 255, nat.mean() / 255], rel=1e-5)
        assert len(seen) == 2
    elif spec.uniform == "undefined":
        with pytest.raises(ScoreUndefinedError, match=r"image 0 .*uniform image \(every pixel is RGB \(77, 77, 77\)\)") as err:
            scorer.score([flat, nat])
        assert err.value.scores == [None, pytest.approx(nat.mean() / 255, rel=1e-5)]
        assert len(seen) == 1 and seen[0] > 0  # the uniform image never reached the model
    else:
        assert scorer.score([flat, nat]) == pytest.approx([spec.uniform, nat.mean() / 255], rel=1e-5)
        assert len(seen) == 1
    assert spec.uniform in ("scored", "undefined") or isinstance(spec.uniform, float)
    if spec.family == "hand-crafted":
        assert spec.uniform_note, f"{name}: the card must say what a uniform image gets and what pyiqa returns"


@pytest.mark.parametrize("name", ["cnniqa", "wadiqam_nr", "arniqa"])
def test_deep_archs_give_a_number_for_a_uniform_image(name, tmp_path):
    """With random weights (no real checkpoints here) the archs still score a uniform image."""
    from banana100.testing.untrained import build_untrained

    side = max(get_metric(name).min_size, 64)
    scorer = MetricScorer.from_model(name, build_untrained(name, tmp_path), device="cpu")
    scores = scorer.score([np.full((side, side, 3), g, np.uint8) for g in (0, 128, 255)])
    assert all(math.isfinite(s) for s in scores)


# -- nearly uniform images, NaN and linear-algebra failures ---------------------------------


def nearly_uniform() -> dict[str, np.ndarray]:
    one = np.full((SIDE, SIDE, 3), 128, np.uint8)
    one[64, 64] = 129
    halves = np.zeros((SIDE, SIDE, 3), np.uint8)
    halves[:, SIDE // 2 :] = 255
    return {"one pixel off": one, "black | white halves": halves}


@pytest.mark.parametrize("backend", ["native", "pyiqa"])
@pytest.mark.parametrize("name", ["piqe", "niqe", "brisque"])
def test_nearly_uniform_images_never_give_nan(name, backend, files):
    """A score comes back finite, or the image is named in a ScoreUndefinedError; never NaN.

    (Measured: NIQE and BRISQUE give NaN, pyiqa's NIQE a LinAlgError, for two flat halves.)
    """
    images = list(nearly_uniform().values())
    try:
        scores = module(name).compute(images=images, device="cpu", backend=backend)["scores"]
    except ScoreUndefinedError as e:
        assert all(f"image {i} " in str(err) for i, err in e.errors.items())
        scores = [s for s in e.scores if s is not None]
    assert all(math.isfinite(s) for s in scores)


class _Picky(torch.nn.Module):
    """Scores the mean, except NaN / inf / a LinAlgError for images whose mean marks them."""

    def forward(self, x):
        m = x.mean(dim=(1, 2, 3)).double()
        if ((m - 0.2).abs() < 0.01).any():
            raise torch.linalg.LinAlgError("linalg.svd: the algorithm failed to converge")
        m = torch.where((m - 0.4).abs() < 0.01, torch.tensor(float("nan"), dtype=m.dtype), m)
        return torch.where((m - 0.6).abs() < 0.01, torch.tensor(float("inf"), dtype=m.dtype), m)


def test_nan_inf_and_linalg_failures_are_named_and_the_others_kept():
    rng = np.random.default_rng(0)

    def img(mean):
        return np.clip(mean * 255 + rng.integers(-3, 4, (40, 40, 3)), 0, 255).astype(np.uint8)

    images = [img(0.1), img(0.2), img(0.4), img(0.6), img(0.8)]
    scorer = MetricScorer.from_model("cnniqa", _Picky(), device="cpu", batch_size=8)
    with pytest.raises(ScoreUndefinedError, match="3 of 5 images have no CNNIQA score") as err:
        scorer.score(images)
    e = err.value
    assert sorted(e.errors) == [1, 2, 3]
    assert "image 1 " in str(e.errors[1]) and "LinAlgError" in str(e.errors[1])
    assert "gave nan" in str(e.errors[2]) and "gave inf" in str(e.errors[3])
    assert e.scores[1:4] == [None, None, None]
    assert e.scores[0] == pytest.approx(images[0].mean() / 255, rel=1e-5)
    assert e.scores[4] == pytest.approx(images[4].mean() / 255, rel=1e-5)


def test_other_model_errors_are_not_hidden():
    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("a bug, not a degenerate image")

    with pytest.raises(RuntimeError, match="a bug"):
        MetricScorer.from_model("cnniqa", Broken(), device="cpu").score([natural(40)])


# -- tiny crops ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.integration) if n == "ilniqe" else n
                                  for n in REAL])  # IL-NIQE at every tiny size: ~20 s
def test_tiny_crops_are_refused_and_the_minimum_scores(name, files, tmp_path):
    spec = get_metric(name)
    m = spec.min_size
    assert m >= spec.accepted_min_size
    sides = sorted({1, 2, 3, 4, 5, 7, 8, 12, 16, 17, m - 1} - {0})
    for s in sides:
        with pytest.raises(ImageTooSmallError, match=f"{spec.display_name} needs at least {m}x{m} pixels"):
            module(name).compute(images=[natural(s)], device="cpu")
    thin = tmp_path / "thin.png"
    Image.fromarray(natural(m - 1, 300)).save(thin)
    with pytest.raises(ImageTooSmallError, match=rf"thin\.png is 300x{m - 1}"):
        module(name).compute(images=[natural(), str(thin)], device="cpu")
    out = module(name).compute(images=[natural(m), natural(m, m + 5, y=200, x=40)], device="cpu")
    assert all(math.isfinite(s) for s in out["scores"])


def test_minimum_sizes_are_stated_for_every_metric():
    for name in ROSTER:
        spec = get_metric(name)
        assert spec.min_size >= spec.accepted_min_size >= 1
        if spec.family == "hand-crafted":
            assert spec.min_size_note, f"{name}: the card must say how its minimum size was measured"


# -- bombs and unreadable files ------------------------------------------------------------


def png_header(width: int, height: int) -> bytes:
    """A 1-bit grayscale PNG whose header claims width x height, with (far too little) data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


@pytest.fixture
def bomb(tmp_path) -> Path:
    path = tmp_path / "bomb.png"
    path.write_bytes(png_header(20000, 20000))
    return path


def test_a_bomb_is_an_image_read_error_naming_the_file_and_the_limit(bomb, tmp_path, capsys):
    good = tmp_path / "good.png"
    Image.fromarray(natural()).save(good)
    for call in (lambda: image_size(bomb), lambda: load_rgb(bomb), lambda: load_rgb(bomb.read_bytes())):
        with pytest.raises(ImageReadError, match=r"20000x20000 pixels \(400,000,000\) exceeds the image size limit of 89,478,485 pixels"):
            call()
    with pytest.raises(ImageReadError, match=rf"{bomb}: 20000x20000 pixels \(400,000,000\) exceeds .*BANANA100_MAX_IMAGE_PIXELS"):
        module("piqe").compute(images=[str(good), str(bomb)], device="cpu")
    # between PIL's limit and twice it PIL only warns: the library refuses from the header, in its own words
    # alone (issue 44 item 15: PIL's "could be decompression bomb DOS attack" came out as a warning beside it)
    mid = tmp_path / "mid.png"
    mid.write_bytes(png_header(10000, 10000))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ImageReadError, match=r"mid\.png: 10000x10000 pixels \(100,000,000\) exceeds the image "
                                                 r"size limit of 89,478,485 pixels"):
            image_size(mid)
    from banana100.cli import main

    assert main(["score", str(mid), "--metrics", "piqe", "--out", str(tmp_path / "s.parquet"), "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "DOS attack" not in err and "Image size (" not in err
    import pandas as pd

    assert "mid.png: 10000x10000 pixels (100,000,000) exceeds" in pd.read_parquet(tmp_path / "s.parquet").error[0]


def test_an_image_that_is_none_is_named_by_its_index():
    """Issue 44 item 15: images=[None] said "<NoneType>: expected ..." without saying which image."""
    ok = natural()
    for images, i in (([None], 0), ([ok, None], 1), ([ok, 3.5], 1)):
        with pytest.raises(ImageReadError, match=rf"^images\[{i}\] <(NoneType|float)>: expected a path, bytes"):
            module("piqe").compute(images=images, device="cpu")


def test_a_raised_limit_holds_while_other_threads_open_files():
    """Decode-ahead threads open files at once; one thread restoring PIL's limit must not make
    another thread's open (with the same raised limit) fail as a bomb (seen in CI, 2026-12-03)."""
    import sys
    import threading

    big = png_header(20000, 20000)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, so that the interleaving happens
    failures: list[str] = []

    def open_many():
        for _ in range(400):
            try:
                image_size(big, max_pixels=400_000_000)
            except ImageReadError as e:
                failures.append(str(e))

    try:
        threads = [threading.Thread(target=open_many) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not failures, f"{len(failures)} opens failed, e.g. {failures[0]}"
    assert Image.MAX_IMAGE_PIXELS == imageio.DEFAULT_MAX_IMAGE_PIXELS  # PIL's own value is back


def test_the_limit_can_be_raised_per_call_globally_and_by_environment(bomb, tmp_path, monkeypatch):
    good = tmp_path / "good.png"
    Image.fromarray(natural()).save(good)
    assert image_size(bomb, max_pixels=400_000_000) == (20000, 20000)  # header only: no 1.2 GB decode
    # raised, the header passes; the pixel data is not there, which is named after the others are scored
    with pytest.raises(ImageReadError, match=r"1 of 2 images could not be decoded .*bomb\.png: corrupt or truncated") as err:
        module("piqe").compute(images=[str(good), str(bomb)], device="cpu", max_image_pixels=400_000_000)
    assert math.isfinite(err.value.scores[0]) and err.value.scores[1] is None
    assert isinstance(err.value.errors[1], ImageReadError)
    # and lowered: a small image over a small limit
    with pytest.raises(ImageReadError, match="exceeds the image size limit of 1,000 pixels"):
        load_rgb(good, max_pixels=1000)
    monkeypatch.setattr(imageio, "MAX_IMAGE_PIXELS", imageio.MAX_IMAGE_PIXELS)  # restored after the test
    imageio.set_max_image_pixels(1000)
    with pytest.raises(ImageReadError, match="limit of 1,000 pixels"):
        image_size(good)
    monkeypatch.setenv("BANANA100_MAX_IMAGE_PIXELS", "5e8")
    assert imageio.limit_from_env() == 500_000_000
    monkeypatch.setenv("BANANA100_MAX_IMAGE_PIXELS", "lots")
    with pytest.raises(ImageReadError, match="BANANA100_MAX_IMAGE_PIXELS='lots'"):
        imageio.limit_from_env()
    with pytest.raises(ValueError, match="positive integer"):
        imageio.set_max_image_pixels(0)
    assert Image.MAX_IMAGE_PIXELS == imageio.DEFAULT_MAX_IMAGE_PIXELS  # PIL's own limit left alone


def unreadable_files(folder: Path) -> dict[str, Path]:
    png = encode_png(natural(64))
    cases = {
        "empty.png": b"",
        "text.png": b"not an image at all\n",
        "truncated.png": png[: len(png) // 2],
        "bad_zlib.png": png[:60] + bytes(64) + png[124:],
        "truncated.jpg": _jpeg()[:400],
    }
    out = {}
    for fname, data in cases.items():
        (folder / fname).write_bytes(data)
        out[fname] = folder / fname
    (folder / "folder.png").mkdir()
    out["folder.png"] = folder / "folder.png"
    return out


def _jpeg() -> bytes:
    import io

    buf = io.BytesIO()
    Image.fromarray(natural(64)).save(buf, format="JPEG")
    return buf.getvalue()


def test_every_read_failure_is_an_image_read_error_naming_the_file(tmp_path):
    for fname, path in unreadable_files(tmp_path).items():
        with pytest.raises(ImageReadError, match=fname.replace(".", r"\.")):
            load_rgb(path)
    lazy = Image.open(tmp_path / "truncated.png")  # a PIL image whose pixels are decoded later
    with pytest.raises(ImageReadError, match="cannot decode the image|corrupt"):
        load_rgb(lazy)


def test_a_decoder_raising_anything_is_still_an_image_read_error(tmp_path, monkeypatch):
    path = tmp_path / "odd.png"
    path.write_bytes(encode_png(natural(32)))
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda self: (_ for _ in ()).throw(struct.error("unpack requires a buffer")))
    with pytest.raises(ImageReadError, match=r"odd\.png: cannot decode the image \(error: unpack requires a buffer\)"):
        load_rgb(path)


# -- banana100 score and the report ---------------------------------------------------------


def write_run(run: Path, images: dict[tuple[str, int], bytes]) -> None:
    """A run folder (manifest and all) holding the given PNG bytes per (chain, step)."""
    with ManifestWriter(run) as writer:
        for (cid, step), data in images.items():
            h, w = image_size(data, max_pixels=10**9)
            rel = f"{cid}/step_{step:03d}.png"
            (run / cid).mkdir(parents=True, exist_ok=True)
            (run / rel).write_bytes(data)
            writer.append({"chain_id": cid, "source_id": cid, "setting": "replicate", "repeat": 0, "step": step,
                           "image": rel, "sha256": sha256_bytes(data), "parent_sha256": None, "prompt": None,
                           "editor": "simulated", "model": "simulated-v1", "seed": None, "width": w, "height": h,
                           "created_at": "2026-01-01T00:00:00Z"})


def test_score_rows_carry_the_error_text_and_the_report_names_the_missing_scores(tmp_path, weights_from_shared):
    from banana100.report import write_report

    rng = np.random.default_rng(0)
    base = natural(SIDE)

    def noisy(step):
        return encode_png(np.clip(base + rng.normal(0, 2 * step, base.shape), 0, 255).astype(np.uint8))

    images = {("good", s): noisy(s) for s in (1, 5, 10, 20)}
    images |= {("flat", 1): encode_png(np.full((SIDE, SIDE, 3), 128, np.uint8))}
    images |= {("flat", s): noisy(s) for s in (5, 10, 20)}
    images |= {("black", 1): noisy(1), ("black", 5): noisy(5), ("black", 10): encode_png(np.zeros((SIDE, SIDE, 3), np.uint8)),
               ("black", 20): noisy(20)}
    images |= {("tiny", 1): encode_png(natural(8)), ("tiny", 5): noisy(5), ("tiny", 10): noisy(10), ("tiny", 20): noisy(20)}
    images |= {("bomb", 1): noisy(1), ("bomb", 5): png_header(20000, 20000), ("bomb", 10): noisy(10), ("bomb", 20): noisy(20)}
    write_run(tmp_path / "run", images)
    with pytest.warns(UserWarning, match="could not be scored"):
        out = scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe"], tmp_path / "s.parquet", progress=False,
                                       decode_workers=0)
    rows = {(r["metric"], r["chain_id"], r["step"]): r for r in pq.read_table(out).to_pylist()}
    assert len(rows) == 2 * len(images)
    for key, r in rows.items():  # a row has a finite score or an error, never a bare NaN
        assert (r["error"] is None) == math.isfinite(r["score"]), (key, r)
        # the native metrics' flat share is kept for every scored image, beside failed ones too
        assert (r["flat_share"] is not None) == (r["error"] is None and r["score"] != 100.0), (key, r)
    assert rows["piqe", "flat", 1]["score"] == 100.0 and rows["piqe", "black", 10]["score"] == 100.0
    assert "NIQE is undefined for a uniform image (every pixel is RGB (128, 128, 128))" in rows["niqe", "flat", 1]["error"]
    assert "flat/step_001.png" in rows["niqe", "flat", 1]["error"]
    assert "RGB (0, 0, 0)" in rows["niqe", "black", 10]["error"]
    for metric, m in (("piqe", 96), ("niqe", 96)):
        assert f"needs at least {m}x{m} pixels" in rows[metric, "tiny", 1]["error"]
        assert "tiny/step_001.png is 8x8" in rows[metric, "tiny", 1]["error"]
        assert "(400,000,000) exceeds the image size limit of 89,478,485" in rows[metric, "bomb", 5]["error"]
        assert "bomb/step_005.png: 20000x20000 pixels (400,000,000)" in rows[metric, "bomb", 5]["error"]

    report = write_report(out, tmp_path / "report").read_text()
    assert "## Missing scores" in report
    assert "| flat | 1 |" in report and "NIQE is undefined for a uniform image" in report
    assert "incomplete (no score at step 1)" in report
    assert "incomplete (no score at step 5)" in report  # the bomb's chain
    assert not re.search(r"\|\s*nan\s*\|", report.lower())  # no NaN shown as a number


def test_decode_ahead_keeps_order_bounds_the_queue_and_stops_early():
    """The one decode-ahead (engine and `banana100 score`): results in input order, at most
    `ahead` items drawn beyond the one handed out, caught errors in place, threads gone after
    the consumer stops."""
    import threading
    import time

    drawn = []

    def items():
        for i in range(50):
            drawn.append(i)
            yield i

    def decode(i):
        time.sleep(0.001 * (i % 3))  # out-of-order completion
        if i == 7:
            raise ImageReadError(f"item {i}: corrupt")
        return i * i

    gen = imageio.decode_ahead(items(), decode, workers=3, ahead=5)
    got = []
    for item, result in gen:
        got.append((item, result))
        assert len(drawn) <= item + 1 + 5  # bounded look-ahead
        if item == 20:
            break
    gen.close()
    assert [i for i, _ in got] == list(range(21))
    assert isinstance(got[7][1], ImageReadError) and got[8][1] == 64
    assert not [t for t in threading.enumerate() if t.name.startswith("banana100-decode")]
    with pytest.raises(ZeroDivisionError):  # not caught: propagates
        list(imageio.decode_ahead(range(3), lambda i: 1 / 0, workers=2, ahead=2))


def test_a_nan_array_is_one_line_naming_its_index_and_the_first_bad_value():
    """compute() and add_batch() on a float array holding NaN: one line with the image's index
    and where the first bad value is (add_batch printed 51 lines of `nan`); a float array in
    [0, 1] goes through add_batch too."""
    piqe = module("piqe")
    bad = np.full((SIDE, SIDE, 3), 0.5)
    bad[3, 5, 1] = np.nan
    where = r"the first value outside is nan at \[3, 5, 1\] \(row, column, channel\)"
    with pytest.raises(ImageReadError, match=r"images\[1\] .*" + where) as info:
        piqe.compute(images=[natural(), bad])
    assert "\n" not in str(info.value)
    with pytest.raises(ImageReadError, match=r"images\[0\] .*" + where) as info:
        piqe.add_batch(images=[bad])
    assert "\n" not in str(info.value)
    with pytest.raises(ImageReadError, match=r"first value outside is 1.5 at \[0, 0, 0\]"):
        load_rgb(np.full((4, 4, 3), 1.5))
    piqe.add_batch(images=[natural() / 255.0, natural()])
    assert len(piqe.compute()["scores"]) == 2
