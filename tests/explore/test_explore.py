"""banana100.explore: what the Space shows, as library functions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from banana100.errors import UploadError
from banana100 import explore as ex
from banana100.imageio import load_rgb
from banana100.chains.manifest import image_path, read_manifest
from banana100.chains.editors.simulated import SimulatedEditor
from banana100.chains.runner import generate_chains
from banana100.chains.settings import load_settings
from banana100.schema import chain_id


@pytest.fixture(scope="module")
def demo_set(tmp_path_factory):
    cache = tmp_path_factory.mktemp("explore")
    dataset, scores = ex.build_demo_set(cache, chains=2, steps=20, metrics="piqe", side=128)
    return cache, dataset, scores


def test_demo_set_is_reused(demo_set):
    cache, dataset, scores = demo_set
    from huggingface_hub import DatasetCard

    from banana100 import __version__

    assert DatasetCard.load(dataset / "README.md").data.license == "apache-2.0"  # drawn by this code
    mtime = scores.stat().st_mtime_ns
    said = []
    assert ex.build_demo_set(cache, chains=2, steps=20, metrics="piqe", side=128, log=said.append) == (dataset, scores)
    assert scores.stat().st_mtime_ns == mtime
    assert len(said) == 1 and said[0].startswith("reusing the demo set in") and f"banana100 {__version__}" in said[0]
    # keyed by this version and the metrics this install computes: another clone's set is not shown
    assert dataset.parent.name == f"demo-v{__version__}-2x20-128-piqe"


def test_demo_set_build_says_each_stage(tmp_path, monkeypatch):
    import banana100

    monkeypatch.setattr(banana100, "__version__", "0.0.0-other")
    said = []
    dataset, _ = ex.build_demo_set(tmp_path, chains=1, steps=20, metrics="piqe", side=64, log=said.append)
    assert said[0].startswith("building a demo set in") and said[-1].startswith("built the demo set")
    assert [line[:3] for line in said[1:-1]] == ["1/4", "2/4", "3/4", "4/4"]
    assert dataset.parent.name == "demo-v0.0.0-other-1x20-64-piqe"


def test_space_without_gradio_prints_the_setup_line():
    """A core install runs `python space/app.py`: one line saying how to set the Space up, exit 2."""
    import subprocess
    import sys

    from fixtures.repopaths import REPO

    code = ("import sys, runpy; sys.modules['gradio'] = None; "
            f"runpy.run_path({str(REPO / 'space' / 'app.py')!r}, run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("space: gradio is not installed") and "Traceback" not in proc.stderr
    assert "bash setup.sh --space" in proc.stderr and "pip install" in proc.stderr


def test_dataset_and_run_folder_show_the_same_chains(demo_set):
    _, dataset, scores = demo_set
    from_dataset = ex.Explorer.open(dataset, scores)
    from_run = ex.Explorer.open(dataset.parent / "run", scores)
    assert from_dataset.images.kind == "dataset folder" and from_run.images.kind == "run folder"
    assert from_dataset.chain_ids() == from_run.chain_ids() == ["dunes__replicate__r0", "skyline__replicate__r0"]
    info = from_dataset.info("dunes__replicate__r0")
    assert (info.source_id, info.setting, info.repeat, info.steps) == ("dunes", "replicate", 0, tuple(range(21)))
    assert from_dataset.find("skyline", "replicate", 0) == "skyline__replicate__r0"
    assert from_dataset.find("skyline", "mirror", 0) is None
    records = {r["step"]: r for r in read_manifest(dataset.parent / "run") if r["chain_id"] == "dunes__replicate__r0"}
    for step in (0, 7, 20):
        a = np.asarray(from_dataset.image("dunes__replicate__r0", step), np.float32)
        b = np.asarray(from_run.image("dunes__replicate__r0", step), np.float32)
        original = load_rgb(image_path(dataset.parent / "run", records[step])).astype(np.float32)
        assert a.shape == original.shape  # small images are shown at full size
        assert np.abs(a - b).mean() == 0
        assert np.abs(a - original).mean() < 3  # display copies are JPEG (q95, 4:4:4)
    with pytest.raises(ex.Banana100Error, match="no step 21"):
        from_dataset.image("dunes__replicate__r0", 21)
    with pytest.raises(ex.Banana100Error, match="unknown chain"):
        from_dataset.image("../etc", 0)


def test_verdicts_and_summary_come_from_the_protocol(demo_set):
    from banana100.report import analyse, load_scores

    _, dataset, scores = demo_set
    e = ex.Explorer.open(dataset, scores)
    results = analyse(load_scores(scores))
    v = e.verdicts("dunes__replicate__r0")
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


class RecordingEditor(SimulatedEditor):
    """The simulated editor, keeping every request it gets."""

    def __init__(self):
        super().__init__()
        self.requests = []

    def edit(self, request):
        self.requests.append(request)
        return super().edit(request)


def _request_view(q):
    """What a request asks for (the meter is the runner's own bookkeeping)."""
    return (q.step, q.prompt, q.seed, q.config, q.simulate, q.chain_id, q.image.tobytes(), q.image_bytes)


@pytest.mark.parametrize("setting", sorted(load_settings()))
def test_stream_chain_makes_the_runner_steps(tmp_path, setting):
    """For every setting (seed rules and transforms included) the live stream sends the runner's
    requests and shows the runner's images."""
    src = tmp_path / "src"
    src.mkdir()
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(src / "noise.png")
    runner_editor, live_editor = RecordingEditor(), RecordingEditor()
    generate_chains(runner_editor, src, setting, steps=3, repeats=1, out_dir=tmp_path / "run", progress=False, seed=7)
    recs = {r["step"]: r for r in read_manifest(tmp_path / "run")}
    streamed = list(ex.stream_chain(live_editor, load_rgb(src / "noise.png"), 3, setting=setting, seed=7,
                                    chain_id=chain_id("noise", setting, 0)))
    assert [s for s, _, _ in streamed] == [0, 1, 2, 3]
    assert [_request_view(q) for q in live_editor.requests] == [_request_view(q) for q in runner_editor.requests]
    for step, rgb, meta in streamed:
        assert np.array_equal(rgb, load_rgb(image_path(tmp_path / "run", recs[step])))
        if step:
            assert meta["finish_reason"] == recs[step]["finish_reason"]


def test_stream_chain_follows_the_setting_rules():
    """The rules the old live chain ignored: a fixed seed, and a cycled transform list."""
    rgb = np.random.default_rng(1).integers(0, 255, (16, 16, 3), dtype=np.uint8)
    ed = RecordingEditor()
    list(ex.stream_chain(ed, rgb, 3, setting="replicate_seed_fixed"))
    assert len({q.seed for q in ed.requests}) == 1
    assert {q.chain_id for q in ed.requests} == {chain_id("live", "replicate_seed_fixed", 0)}
    ed = RecordingEditor()
    list(ex.stream_chain(ed, rgb, 1))  # the Space's live chain
    assert ed.requests[0].chain_id == ex.LIVE_CHAIN_ID == "live__replicate__r0"
    assert set(ex.scores_frame([{"step": 0, "metric": "piqe", "score": 1.0}])["chain_id"]) == {ex.LIVE_CHAIN_ID}
    ed = RecordingEditor()
    list(ex.stream_chain(ed, rgb, 3, setting="color_roundtrip"))
    assert [q.simulate["transform"] for q in ed.requests] == ["desaturate", "recolor", "desaturate"]


def test_check_upload(tmp_path):
    good = tmp_path / "good.jpg"
    Image.new("RGB", (64, 40), "red").save(good)
    assert ex.check_upload(good).shape == (40, 64, 3)
    text = tmp_path / "x.png"
    text.write_text("hello")
    with pytest.raises(UploadError, match="not an image"):
        ex.check_upload(text)
    gif = tmp_path / "a.gif"
    Image.new("RGB", (64, 64)).save(gif)
    with pytest.raises(UploadError, match="GIF images are not accepted"):
        ex.check_upload(gif)
    big = tmp_path / "big.png"
    Image.new("L", (5000, 4000)).save(big)
    with pytest.raises(UploadError, match="20.0 megapixels"):
        ex.check_upload(big)
    with pytest.raises(UploadError, match="limit is 0 MB"):
        ex.check_upload(good, max_bytes=10)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(UploadError, match="empty"):
        ex.check_upload(empty)
    with pytest.raises(UploadError, match="could not be read"):
        ex.check_upload(tmp_path / "missing.png")


def test_samples_by_name_only():
    assert "coffee" in ex.sample_names() and ex.sample_names()[0] == "dunes"
    assert ex.sample_image("coffee").shape == (400, 600, 3)
    assert ex.sample_image("dunes", side=128).shape == (96, 128, 3)
    from banana100.synth import generated_source

    assert np.array_equal(generated_source("moss", 128), generated_source("moss", 128))  # deterministic
    assert not np.array_equal(generated_source("moss", 128), generated_source("moss", 128, seed=1))
    with pytest.raises(ex.Banana100Error, match="unknown generated source 'nope'"):
        generated_source("nope")
    with pytest.raises(ValueError, match="side >= 32"):
        generated_source("grid", 16)
    with pytest.raises(UploadError, match="unknown sample"):
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
        assert np.array_equal(np.asarray(hub.image("skyline__replicate__r0", step)),
                              np.asarray(local.image("skyline__replicate__r0", step)))


# -- the original release, through a local stand-in laid out as its Hub repository -------------


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    from banana100.testing.releasetools import make_release_standin

    return make_release_standin(tmp_path_factory.mktemp("release") / "Banana100")


def _spec(location):
    return ex.ReleaseSpec(str(location), ex.ORIGINAL_RELEASE.pattern)


def test_release_spec_is_configured_in_one_place():
    assert ex.ORIGINAL_RELEASE.location == "kenantang/Banana100"
    assert ex.ORIGINAL_RELEASE.url == "hf://datasets/kenantang/Banana100"
    spec = ex.ReleaseSpec.from_env({ex.RELEASE_ENV: "me/copy", ex.RELEASE_PATTERN_ENV: "{chain}/{step}.png"})
    assert (spec.url, spec.pattern) == ("hf://datasets/me/copy", "{chain}/{step}.png")
    assert ex.ReleaseSpec.from_env({}) == ex.ORIGINAL_RELEASE
    assert ex.space_source({}) == "demo"
    assert ex.space_source({"SPACE_ID": "someone/banana100"}) == "release"  # on the Hub: the real chains
    assert ex.space_source({ex.RELEASE_ENV: "/data/copy"}) == "release"
    assert ex.space_source({ex.DATASET_ENV: "x", "SPACE_ID": "a/b"}) == "dataset"


def test_release_is_listed_then_fetched_one_chain_at_a_time(standin, tmp_path):
    e = ex.open_release(_spec(standin), tmp_path, metrics=["piqe"])
    assert e.images.kind == "original release"
    assert e.chain_ids() == ["dunes__replicate__r0", "dunes__replicate__r1", "moss__replicate__r0",
                             "moss__replicate__r1"]
    assert e.info("moss__replicate__r1").steps == tuple(range(21))
    files = e.images.files_dir
    assert not files.exists()  # listing downloads nothing
    shown = np.asarray(e.image("moss__replicate__r1", 20), np.float32)
    fetched = sorted(p.relative_to(files).as_posix() for p in files.rglob("*.png"))
    assert fetched == [f"replicate/moss/rep1/img_{k:03d}.png" for k in range(21)]  # that chain only
    original = load_rgb(standin / "replicate/moss/rep1/img_020.png").astype(np.float32)
    assert shown.shape == original.shape and np.abs(shown - original).mean() < 3
    records = read_manifest(e.images.run_dir)  # imported by import-chains: checked, hashed, linked
    assert {r["chain_id"] for r in records} == {"moss__replicate__r1"}
    by_step = {r["step"]: r for r in records}
    assert by_step[5]["parent_sha256"] == by_step[4]["sha256"] and by_step[3]["model"] == "gemini-3-pro-image-preview"
    e.image("dunes__replicate__r0", 0)  # a second chain joins the same run folder
    assert {r["chain_id"] for r in read_manifest(e.images.run_dir)} == {"moss__replicate__r1", "dunes__replicate__r0"}


def test_release_scores_on_demand_are_cached_per_chain_metric_backend(standin, tmp_path):
    e = ex.open_release(_spec(standin), tmp_path, metrics=["piqe"])
    cid = "dunes__replicate__r1"
    assert e.missing_metrics(cid) == ["piqe"] and e.scored_chains() == 0
    assert e.curves(cid).empty and e.verdicts(cid).empty
    seen = []
    e.score_chain(cid, progress=lambda frac, text: seen.append((frac, text)))
    fracs = [f for f, _ in seen]
    assert fracs == sorted(fracs) and fracs[-1] == 1.0 and any("PIQE: scoring" in t for _, t in seen)
    cache = e.on_demand.path(cid, "piqe")
    assert cache.relative_to(tmp_path).parts[-2:] == (cid, "piqe__native.parquet")
    table = pd.read_parquet(cache)
    assert sorted(table["step"]) == [s for s in ex.ON_DEMAND_STEPS if s <= 20]
    # the scores are the engine's own
    from banana100.metrics.engine.scorer import MetricScorer

    direct = MetricScorer("piqe", device="cpu").score([standin / "replicate/dunes/rep1/img_005.png"])[0]
    assert table.loc[table["step"] == 5, "score"].item() == pytest.approx(direct, rel=1e-6)
    assert e.missing_metrics(cid) == [] and e.scored_chains() == 1
    assert e.verdicts(cid).iloc[0]["verdict"] in ex.VERDICT_TEXT.values()
    assert e.summary().iloc[0]["chains"] == 1
    # a new visit (the Space restarted) reads the cache and scores nothing again
    mtime = cache.stat().st_mtime_ns
    again = ex.open_release(_spec(standin), tmp_path, metrics=["piqe"])
    assert again.missing_metrics(cid) == [] and again.scored_chains() == 1
    again.score_chain(cid)
    assert cache.stat().st_mtime_ns == mtime
    assert not again.curves(cid).empty


def test_release_with_a_published_scores_file_uses_it(standin, tmp_path):
    import shutil

    from banana100.testing.releasetools import make_release_standin

    scores = tmp_path / "scores.parquet"
    pd.DataFrame({"chain_id": ["dunes__replicate__r0"] * 4, "step": [1, 5, 10, 20], "metric": "brisque",
                  "score": [34.1, 20.0, 5.0, -9.8], "lower_better": True}).to_parquet(scores)
    copy = tmp_path / "with-scores"
    shutil.copytree(standin, copy)
    (copy / ".complete").unlink()
    make_release_standin(copy, scores=scores)  # adds the scores file to the existing chains
    e = ex.open_release(_spec(copy), tmp_path / "cache", metrics=["piqe"])
    assert e.on_demand is None and e.missing_metrics("dunes__replicate__r0") == []
    assert e.verdicts("dunes__replicate__r0").iloc[0]["verdict"] == "FAIL (missed it)"  # BRISQUE improved


def test_release_errors_name_the_problem(standin, tmp_path):
    with pytest.raises(ex.DatasetError, match="none of its .* files matches the pattern"):
        ex.open_release(ex.ReleaseSpec(str(standin), "{chain}/frame{step}.jpg"), tmp_path, metrics=["piqe"])
    with pytest.raises(ex.DatasetError, match="cannot list the release"):
        ex.open_release(_spec(tmp_path / "absent"), tmp_path, metrics=["piqe"])


def test_release_through_the_hub_filesystem(standin, tmp_path, monkeypatch):
    """hf://datasets/<id>: listing and downloads go through huggingface_hub.HfFileSystem (here a
    stand-in serving the local copy under the Hub's path names)."""
    import huggingface_hub
    from fsspec.implementations.local import LocalFileSystem

    prefix = "datasets/someone/Banana100"
    calls = []

    class FakeHubFS(LocalFileSystem):
        def _local(self, path):
            assert path.startswith(prefix), path
            return str(standin) + path[len(prefix):]

        def exists(self, path, **kw):
            return super().exists(self._local(path))

        def find(self, path, **kw):
            calls.append(("find", path))
            return [prefix + p[len(str(standin)):] for p in super().find(self._local(path), **kw)]

        def get_file(self, rpath, lpath, **kw):
            calls.append(("get", rpath))
            return super().get_file(self._local(rpath), lpath, **kw)

    monkeypatch.setattr(huggingface_hub, "HfFileSystem", FakeHubFS)
    e = ex.open_release(ex.ReleaseSpec("someone/Banana100", ex.ORIGINAL_RELEASE.pattern), tmp_path, metrics=["piqe"])
    assert calls == [("find", prefix)]
    assert e.images.location == "hf://datasets/someone/Banana100" and len(e.chain_ids()) == 4
    e.score_chain("moss__replicate__r0")
    gets = [c[1] for c in calls if c[0] == "get"]
    assert gets == [f"{prefix}/replicate/moss/rep0/img_{k:03d}.png" for k in range(21)]
    assert e.scored_chains() == 1


# -- why it fails ----------------------------------------------------------------------------------


def test_why_view_shows_what_changed_and_the_mscn_map():
    import torch

    from banana100.synth import generated_source
    from banana100.metrics.native import matlab, nss

    ref = generated_source("spheres", 128)  # 128x96: smooth backdrop, spheres
    rng = np.random.default_rng(0)
    noisy = np.clip(ref + rng.normal(0, 6, ref.shape), 0, 255).astype(np.uint8)
    same = ex.why_view(ref, ref, crop=64)
    assert np.all(np.asarray(same["residual"]) == 128)  # nothing changed since step 1
    v = ex.why_view(ref, noisy, crop=64)
    top, left, size = v["box"]
    assert size == 64 and v["crop"].size == (64, 64)
    assert np.array_equal(np.asarray(v["crop"]), noisy[top:top + 64, left:left + 64])
    assert np.asarray(v["residual"], np.float32).std() > 10  # the grain, amplified
    # the map is the metrics' own MSCN (banana100.metrics.native.nss), scaled for display
    y = matlab.rgb2gray(torch.from_numpy(noisy.copy()).permute(2, 0, 1)[None], uint8=True)[0, 0]
    m = nss.mscn(y, matlab.fspecial_gaussian(7, 7 / 6), "replicate").numpy()[top:top + 64, left:left + 64]
    assert np.abs(np.asarray(v["mscn"], np.float32) - np.clip(128 + 40 * m + 0.5, 0, 255).astype(np.uint8)).max() <= 1
    assert v["alpha"][1] > v["alpha"][0]  # grain on a smooth image: a less peaky, more Gaussian histogram
    fig = ex.plot_mscn_histograms(v, 1, 20)
    assert "step 20: shape" in " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    # the flattest part of step 1 is where the crop goes: texture on the left, flat on the right
    half = np.zeros((96, 192, 3), np.uint8) + 120
    half[:, :96] = rng.integers(0, 255, (96, 96, 3))
    assert ex.why_view(half, half, crop=64)["box"][1] == 192 - 64
    # a cropped copy (real copies often are) is compared after resizing step 1 to its size
    assert ex.why_view(ref, noisy[:90, :120], crop=64)["crop"].size == (64, 64)


def test_demo_note_says_what_failed(demo_set):
    _, dataset, scores = demo_set
    e = ex.Explorer.open(dataset, scores)
    note = ex.demo_note(e, 2, 20, 128)
    assert note.startswith("**Simulated demo set**")
    r = e.results["piqe"]
    assert f"PIQE missed the damage in {r['n_failed']} of 2 chains" in note
    assert "34.1 -> -9.8" in note and "no pyiqa metric passed every chain" in note


def test_demo_note_names_the_metrics_left_out_for_want_of_files(demo_set, monkeypatch, tmp_path):
    _, dataset, scores = demo_set
    e = ex.Explorer.open(dataset, scores)
    monkeypatch.setenv("BANANA100_WEIGHTS", str(tmp_path / "none"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    note = ex.demo_note(e, 2, 20, 128)
    assert ("NIQE and BRISQUE are not shown: their parameter files are not on this machine "
            "(`banana100 weights download niqe brisque` adds them, online).") in note.split(". ", 1)[1][:200]


def test_on_demand_keeps_scoring_past_images_without_a_score(tmp_path, weights_from_shared):
    # a uniform step (NIQE has no score for it) and a step too small for NIQE become rows with
    # their error; the other steps are scored, and the protocol sees those steps as missing
    from banana100.metrics.table import get_metric

    rng = np.random.default_rng(0)
    smooth = (128 + 40 * np.sin(np.linspace(0, 6, 128))[None, :, None] + rng.normal(0, 3, (128, 128, 3)))
    images = {0: smooth.clip(0, 255).astype(np.uint8), 1: np.full((128, 128, 3), 77, np.uint8),
              2: smooth[:40, :40].clip(0, 255).astype(np.uint8), 5: smooth[::-1].clip(0, 255).astype(np.uint8)}
    info = ex.ChainInfo("c__replicate__r0", "c", "replicate", 0, (0, 1, 2, 5))
    table = ex.ChainScores(tmp_path, steps=(0, 1, 2, 5)).compute(info, "niqe", images)
    by_step = table.set_index("step")
    assert np.isfinite(by_step.loc[[0, 5], "score"]).all() and by_step.loc[[0, 5], "error"].isna().all()
    assert np.isnan(by_step.loc[1, "score"]) and "uniform" in by_step.loc[1, "error"].lower()
    assert np.isnan(by_step.loc[2, "score"]) and f"{get_metric('niqe').min_size}" in by_step.loc[2, "error"]


def test_check_upload_minimum_side(tmp_path):
    small = tmp_path / "small.png"
    Image.new("RGB", (90, 200), "red").save(small)
    assert ex.check_upload(small).shape == (200, 90, 3)
    with pytest.raises(UploadError, match="at least 96 pixels"):
        ex.check_upload(small, min_side=96)


def test_live_metrics_are_the_demos_choice_kept_to_the_shown_curves(tmp_path, monkeypatch):
    """One choice of the live metrics (the demo's `pick_metrics("auto")`), not a second list."""
    monkeypatch.setenv("BANANA100_WEIGHTS", str(tmp_path))  # an empty store: only PIQE needs no file
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    from banana100.demo import pick_metrics

    assert ex.live_metrics() == pick_metrics("auto") == ["piqe"]
    assert ex.live_metrics(["niqe", "musiq"]) == ["piqe"]  # nothing shown is at hand: PIQE at least


def test_live_metrics_with_the_parameter_files_at_hand(weights_from_shared):
    assert ex.live_metrics() == ["piqe", "niqe", "brisque"]
    assert ex.live_metrics(["niqe", "musiq"]) == ["niqe"]


def test_protocol_steps_fit_the_chains_or_follow_the_environment(tmp_path):
    import pytest as _pytest

    from banana100.errors import Banana100Error

    def images(last):
        return ex.ChainImages("x", "run folder", {"c": ex.ChainInfo("c", "c", "replicate", 0, tuple(range(last + 1)))},
                              loader=lambda cid: {})

    assert ex.protocol_steps(images(100), env={}) == (5, 10, 20)
    assert ex.protocol_steps(images(10), env={}) == (2, 5, 10)
    assert ex.protocol_steps(images(10), env={ex.CHECK_STEPS_ENV: "3, 9"}) == (3, 9)
    with _pytest.raises(Banana100Error, match="BANANA100_SPACE_CHECK_STEPS='five': expected whole steps"):
        ex.protocol_steps(images(10), env={ex.CHECK_STEPS_ENV: "five"})
    with _pytest.raises(Banana100Error, match="each after the reference step 1"):
        ex.protocol_steps(images(10), check_steps=(1, 5))


def test_chain_info_names_variant_and_chat_mode():
    plain = ex.ChainInfo("c__replicate__r0", "c", "replicate", 0, (0, 1))
    same = ex.ChainInfo("c__replicate__flux__same-chat__r1", "c", "replicate", 1, (0, 1), "same", "flux")
    assert plain.kind == "" and plain.choice == 0 and "same chat" not in plain.label
    assert same.kind == "flux, same chat" and same.choice == "flux, same chat, repeat 1"
    assert same.label == "c | replicate | flux, same chat | repeat 1 (2 images)"


def test_caches_of_edit_damage_scores_name_the_detector_version(tmp_path):
    """A demo set or an on-demand cache scored by an earlier edit_damage is not served after a refit: both
    names carry the detector's version (the metric table's version of edit_damage); other metrics' names do not."""
    from banana100.explore.demoset import demo_set_name
    from banana100.explore.ondemand import ChainScores
    from banana100.metrics.table import get_metric

    v = get_metric("edit_damage").version
    assert f"-ed{v}-" in demo_set_name(["piqe", "edit_damage", "edit_damage_rel"], 4, 20, 768)
    assert "-ed" not in demo_set_name(["piqe"], 4, 20, 768)
    cache = ChainScores(tmp_path)
    assert cache.path("c", "edit_damage").name == f"edit_damage__native__v{v}.parquet"
    # edit_damage_rel changed with the detector's version 3: its cache names the version too
    assert cache.path("c", "edit_damage_rel").name == f"edit_damage_rel__native__v{v}.parquet"
    assert cache.path("c", "piqe").name.endswith("__native.parquet")
