"""banana100.explore: what the Space shows, as library functions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from banana100 import explore as ex
from banana100.editors import make_editor
from banana100.imageio import load_rgb
from banana100.manifest import image_path, read_manifest
from banana100.runner import generate_chains
from banana100.schema import chain_id


@pytest.fixture(scope="module")
def demo_set(tmp_path_factory):
    cache = tmp_path_factory.mktemp("explore")
    dataset, scores = ex.build_demo_set(cache, chains=2, steps=20, metrics="piqe", max_side=64)
    return cache, dataset, scores


def test_demo_set_is_reused(demo_set):
    cache, dataset, scores = demo_set
    mtime = scores.stat().st_mtime_ns
    assert ex.build_demo_set(cache, chains=2, steps=20, metrics="piqe", max_side=64) == (dataset, scores)
    assert scores.stat().st_mtime_ns == mtime


def test_dataset_and_run_folder_show_the_same_chains(demo_set):
    _, dataset, scores = demo_set
    from_dataset = ex.Explorer.open(dataset, scores)
    from_run = ex.Explorer.open(dataset.parent / "run", scores)
    assert from_dataset.images.kind == "dataset folder" and from_run.images.kind == "run folder"
    assert from_dataset.chain_ids() == from_run.chain_ids() == ["coffee__replicate__r0", "rocket__replicate__r0"]
    info = from_dataset.info("coffee__replicate__r0")
    assert (info.source_id, info.setting, info.repeat, info.steps) == ("coffee", "replicate", 0, tuple(range(21)))
    assert from_dataset.find("rocket", "replicate", 0) == "rocket__replicate__r0"
    assert from_dataset.find("rocket", "mirror", 0) is None
    records = {r["step"]: r for r in read_manifest(dataset.parent / "run") if r["chain_id"] == "coffee__replicate__r0"}
    for step in (0, 7, 20):
        a = np.asarray(from_dataset.image("coffee__replicate__r0", step), np.float32)
        b = np.asarray(from_run.image("coffee__replicate__r0", step), np.float32)
        original = load_rgb(image_path(dataset.parent / "run", records[step])).astype(np.float32)
        assert a.shape == original.shape  # small images are shown at full size
        assert np.abs(a - b).mean() == 0
        assert np.abs(a - original).mean() < 3  # display copies are JPEG (q95, 4:4:4)
    with pytest.raises(ex.Banana100Error, match="no step 21"):
        from_dataset.image("coffee__replicate__r0", 21)
    with pytest.raises(ex.Banana100Error, match="unknown chain"):
        from_dataset.image("../etc", 0)


def test_verdicts_and_summary_come_from_the_protocol(demo_set):
    from banana100.report import analyse, load_scores

    _, dataset, scores = demo_set
    e = ex.Explorer.open(dataset, scores)
    results = analyse(load_scores(scores))
    v = e.verdicts("coffee__replicate__r0")
    chain = results["piqe"]["per_chain"][0]
    assert list(v.columns) == ["metric", "direction", "verdict", "d5", "d10", "d20", "rho"]
    assert v.iloc[0]["verdict"] == ex.VERDICT_TEXT[chain["passed"]]
    assert v.iloc[0]["d10"] == f"{chain['d_10']:+.3g}"
    s = e.summary()
    assert s.iloc[0]["chains"] == 2 and s.iloc[0]["failed"] == results["piqe"]["n_failed"]


def test_chain_curves_orient_and_normalise():
    df = pd.DataFrame({
        "chain_id": ["c"] * 6 + ["d"] * 3,
        "metric": ["niqe"] * 3 + ["musiq"] * 3 + ["niqe"] * 3,
        "step": [0, 1, 2] * 3,
        "score": [3.0, 4.0, 5.0, 50.0, 50.0, 50.0, 1.0, 1.0, 1.0],
        "lower_better": [True] * 3 + [False] * 3 + [True] * 3,
    })
    c = ex.chain_curves(df, "c")
    niqe = c[c["metric"] == "niqe"]
    assert niqe["normalised"].tolist() == [1.0, 0.5, 0.0]  # NIQE rising = worse = down
    assert niqe["oriented"].tolist() == [-3.0, -4.0, -5.0]
    assert c[c["metric"] == "musiq"]["normalised"].tolist() == [0.5, 0.5, 0.5]  # flat
    assert list(dict.fromkeys(c["metric"])) == ["niqe", "musiq"]  # metric-table order
    fig = ex.plot_curves(c, step=1)
    assert len(fig.axes[0].lines) >= 3
    assert ex.chain_curves(df, "nothing").empty


def test_stream_chain_makes_the_runner_images(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(src / "noise.png")
    generate_chains(make_editor("simulated"), src, "replicate", steps=3, repeats=1, out_dir=tmp_path / "run",
                    progress=False, seed=7)
    recs = {r["step"]: r for r in read_manifest(tmp_path / "run")}
    streamed = list(ex.stream_chain(make_editor("simulated"), load_rgb(src / "noise.png"), 3, seed=7,
                                    chain_id=chain_id("noise", "replicate", 0)))
    assert [s for s, _, _ in streamed] == [0, 1, 2, 3]
    for step, rgb, _ in streamed:
        assert np.array_equal(rgb, load_rgb(image_path(tmp_path / "run", recs[step])))


def test_check_upload(tmp_path):
    good = tmp_path / "good.jpg"
    Image.new("RGB", (64, 40), "red").save(good)
    assert ex.check_upload(good).shape == (40, 64, 3)
    text = tmp_path / "x.png"
    text.write_text("hello")
    with pytest.raises(ex.UploadError, match="not an image"):
        ex.check_upload(text)
    gif = tmp_path / "a.gif"
    Image.new("RGB", (64, 64)).save(gif)
    with pytest.raises(ex.UploadError, match="GIF images are not accepted"):
        ex.check_upload(gif)
    big = tmp_path / "big.png"
    Image.new("L", (5000, 4000)).save(big)
    with pytest.raises(ex.UploadError, match="20.0 megapixels"):
        ex.check_upload(big)
    with pytest.raises(ex.UploadError, match="limit is 0 MB"):
        ex.check_upload(good, max_bytes=10)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(ex.UploadError, match="empty"):
        ex.check_upload(empty)
    with pytest.raises(ex.UploadError, match="could not be read"):
        ex.check_upload(tmp_path / "missing.png")


def test_samples_by_name_only():
    assert "coffee" in ex.sample_names()
    assert ex.sample_image("coffee").shape == (400, 600, 3)
    with pytest.raises(ex.UploadError, match="unknown sample"):
        ex.sample_image("../../etc/passwd")
    assert ex.shrink(np.zeros((400, 600, 3), np.uint8), 300).shape == (200, 300, 3)


def test_open_refuses_what_is_not_a_dataset(tmp_path):
    with pytest.raises(ex.DatasetError, match="neither a run folder"):
        ex.ChainImages.open(tmp_path)
    with pytest.raises(ex.DatasetError, match="no such folder"):
        ex.ChainImages.open(tmp_path / "nope" / "deeper")


def test_hub_dataset_is_read_through_the_hub_filesystem(demo_set, monkeypatch):
    """The Hub path (card from hf_hub_download, Parquet files through HfFileSystem), offline:
    both stand-ins serve the local demo dataset folder as if it were `someone/banana100-demo`."""
    import huggingface_hub
    from fsspec.implementations.local import LocalFileSystem

    _, dataset, scores = demo_set
    repo = "someone/banana100-demo"
    prefix = f"datasets/{repo}/"
    calls = []

    def fake_download(repo_id, filename, repo_type=None, cache_dir=None, **kw):
        calls.append((repo_id, filename, repo_type))
        return str(dataset / filename)

    class FakeHubFS(LocalFileSystem):
        def _local(self, path):
            assert path.startswith(prefix), path
            return str(dataset / path[len(prefix):])

        def glob(self, path, **kw):
            return [prefix + str(p.relative_to(dataset)) for p in sorted(dataset.glob(path[len(prefix):]))]

        def open(self, path, mode="rb", **kw):
            return super().open(self._local(path), mode, **kw)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    monkeypatch.setattr(huggingface_hub, "HfFileSystem", FakeHubFS)
    hub = ex.Explorer.open(repo, scores)
    local = ex.Explorer.open(dataset, scores)
    assert calls == [(repo, "README.md", "dataset")]
    assert hub.images.kind == "Hub dataset" and hub.images.location == f"hf://datasets/{repo}"
    assert hub.chain_ids() == local.chain_ids()
    for step in (0, 20):
        assert np.array_equal(np.asarray(hub.image("rocket__replicate__r0", step)),
                              np.asarray(local.image("rocket__replicate__r0", step)))
