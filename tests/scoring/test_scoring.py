"""`banana100 score`: rows per image and metric, resume, isolated failures, named errors."""

import pyarrow.parquet as pq
import pytest

import banana100.scoring as scoring
from banana100.metrics.engine.scorer import MetricScorer
from banana100.errors import ManifestError, WeightsNotFoundError
from banana100.testing.runfolder import make_run_folder


def test_scores_every_image_and_metric(tmp_path, weights_from_shared):
    records = make_run_folder(tmp_path / "run", steps=5, size=(100, 120))
    out = scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe"], tmp_path / "s.parquet", device="cpu",
                                   progress=False)
    table = pq.read_table(out).to_pylist()
    assert len(table) == len(records) * 2
    assert not (tmp_path / "s.parquet.parts").exists()
    # Equal to the engine called directly on the files.
    niqe = MetricScorer("niqe", device="cpu")
    files = [str(tmp_path / "run" / r["image"]) for r in records]
    direct = dict(zip([(r["chain_id"], r["step"]) for r in records], niqe.score(files), strict=True))
    for row in table:
        if row["metric"] == "niqe":
            assert row["score"] == pytest.approx(direct[(row["chain_id"], row["step"])], rel=1e-12)
            assert row["lower_better"] is True and row["error"] is None


def test_resume_after_interruption_scores_only_what_is_left(tmp_path, weights_from_shared, monkeypatch):
    records = make_run_folder(tmp_path / "run", steps=9, size=(100, 100))  # 20 images
    out = tmp_path / "s.parquet"
    real = scoring.score_chunk
    calls = []

    def interrupted(chunk, scorers, *uploads):
        calls.append(len(chunk))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(chunk, scorers, *uploads)

    monkeypatch.setattr(scoring, "score_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe"], out, chunk_size=4, progress=False)
    assert not out.exists()
    assert len(list((tmp_path / "s.parquet.parts").glob("part-*.parquet"))) == 2  # 8 images kept

    counted = []
    monkeypatch.setattr(scoring, "score_chunk", lambda chunk, scorers, *up: counted.append(len(chunk)) or real(chunk, scorers, *up))
    scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe"], out, chunk_size=4, progress=False)
    assert sum(counted) == len(records) - 8
    rows = pq.read_table(out).to_pylist()
    keys = [(r["chain_id"], r["step"], r["metric"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(records) * 2

    # A third run has nothing left to do.
    counted.clear()
    scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe"], out, chunk_size=4, progress=False)
    assert counted == []
    # Adding a metric scores only that metric.
    scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe", "brisque"], out, chunk_size=4, progress=False)
    assert pq.read_table(out).num_rows == len(records) * 3


def test_too_small_image_is_isolated_and_named(tmp_path, weights_from_shared):
    make_run_folder(tmp_path / "run", steps=2, size=(64, 80))
    with pytest.warns(UserWarning, match="could not be scored"):
        out = scoring.score_to_parquet(tmp_path / "run", ["brisque", "niqe"], tmp_path / "s.parquet", progress=False)
    rows = pq.read_table(out).to_pylist()
    niqe = [r for r in rows if r["metric"] == "niqe"]
    assert all(r["score"] != r["score"] for r in niqe)  # NaN
    assert "NIQE needs at least 96x96 pixels" in niqe[0]["error"] and "step_000.png is 80x64" in niqe[0]["error"]
    assert all(r["error"] is None for r in rows if r["metric"] == "brisque")  # BRISQUE's minimum is 32


def test_missing_image_and_missing_manifest_are_named(tmp_path, weights_from_shared):
    records = make_run_folder(tmp_path / "run", steps=2)
    (tmp_path / "run" / records[1]["image"]).unlink()
    with pytest.raises(ManifestError, match=records[1]["image"].replace("/", ".")):
        scoring.score_to_parquet(tmp_path / "run", ["piqe"], tmp_path / "s.parquet", progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(Exception, match="neither a run folder"):
        scoring.score_to_parquet(tmp_path / "empty", ["piqe"], tmp_path / "s.parquet", progress=False)


def test_missing_weights_stop_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("BANANA100_WEIGHTS", str(tmp_path / "no-weights"))
    make_run_folder(tmp_path / "run", steps=2, size=(100, 100))
    with pytest.raises(WeightsNotFoundError, match="niqe_modelparameters.mat"):
        scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe"], tmp_path / "s.parquet", progress=False)
    assert not (tmp_path / "s.parquet.parts").exists() and not (tmp_path / "s.parquet").exists()


def test_decoding_threads_give_the_same_images_in_the_same_order(tmp_path, monkeypatch):
    import threading

    records = make_run_folder(tmp_path / "run", steps=6, size=(30, 40))
    done = {(records[1]["chain_id"], records[1]["step"], "piqe")}
    threads = []
    real = scoring.feed.load_rgb
    monkeypatch.setattr(scoring.feed, "load_rgb", lambda data: threads.append(threading.get_ident()) or real(data))
    inline = list(scoring.decoded_images(tmp_path / "run", ["piqe"], done, workers=0))
    assert threads and set(threads) == {threading.get_ident()}
    threads.clear()
    for rank, world in ((0, 1), (1, 2)):
        inline = list(scoring.decoded_images(tmp_path / "run", ["piqe"], done, rank, world, workers=0))
        workers = list(scoring.decoded_images(tmp_path / "run", ["piqe"], done, rank, world, workers=2))
        assert [(d.record["chain_id"], d.record["step"], d.needed) for d in workers] == \
               [(d.record["chain_id"], d.record["step"], d.needed) for d in inline]
        assert all((a.rgb is None and b.rgb is None) or (a.rgb == b.rgb).all() for a, b in zip(workers, inline, strict=True))
    assert set(threads) - {threading.get_ident()}, "workers=2 decoded nothing off the calling thread"
    assert len(inline) == len(records) // 2
    assert [d.needed for d in scoring.decoded_images(tmp_path / "run", ["piqe"], done, workers=2)][1] == []


# -- your own images: a folder, files, a glob ------------------------------------------------


def _own_images(folder, n=3, size=(100, 120)):
    """n PNG/JPEG files of noise on a gradient, one in a sub-folder, and a non-image file beside them."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(1)
    (folder / "sub").mkdir(parents=True)
    paths = []
    for i in range(n):
        base = np.linspace(0, 200, size[1])[None, :, None].repeat(size[0], 0).repeat(3, 2)
        rgb = np.clip(base + rng.normal(0, 3 + 5 * i, base.shape), 0, 255).astype(np.uint8)
        path = folder / ("sub" if i == 0 else "") / f"img{i}.{'jpg' if i == 2 else 'png'}"
        Image.fromarray(rgb).save(path)
        paths.append(path)
    (folder / "notes.txt").write_text("not an image")
    return paths


def test_a_plain_folder_of_images_gives_one_row_per_image(tmp_path):
    paths = _own_images(tmp_path / "mine")
    out = scoring.score_to_parquet(tmp_path / "mine", ["piqe"], tmp_path / "s.parquet", device="cpu", progress=False)
    rows = pq.read_table(out).to_pylist()
    assert sorted(r["image"] for r in rows) == sorted(str(p) for p in paths)  # the .txt is not an image
    direct = dict(zip(map(str, paths), MetricScorer("piqe", device="cpu").score([str(p) for p in paths]), strict=True))
    for r in rows:
        assert r["chain_id"] is None and r["step"] is None and r["metric"] == "piqe"
        assert r["score"] == pytest.approx(direct[r["image"]], rel=1e-12) and r["error"] is None
        assert (r["width"], r["height"]) == (120, 100) and len(r["sha256"]) == 64
    # rerun: nothing is scored twice
    scoring.score_to_parquet(tmp_path / "mine", ["piqe"], out, device="cpu", progress=False)
    assert pq.read_table(out).num_rows == len(paths)
    # a report needs chains: it says so instead of a wrong table
    from banana100.errors import DatasetError
    from banana100.report import write_report

    with pytest.raises(DatasetError, match="no chain steps"):
        write_report(out, tmp_path / "r")


def test_files_and_glob_patterns_of_images(tmp_path):
    paths = _own_images(tmp_path / "mine")
    out = scoring.score_to_parquet([paths[1], str(tmp_path / "mine" / "**" / "*.png")], ["piqe"],
                                   tmp_path / "s.parquet", device="cpu", progress=False)
    images = pq.read_table(out).column("image").to_pylist()
    # img1 named, then the pattern's two PNGs (img1 again: one row; the .jpg not matched)
    assert sorted(images) == sorted(str(p) for p in paths[:2])
    with pytest.raises(Exception, match="notes.txt: not an image file"):
        scoring.score_to_parquet([tmp_path / "mine" / "notes.txt"], ["piqe"], tmp_path / "t.parquet", progress=False)
    with pytest.raises(Exception, match=r"\*.gif: the pattern matches no image file"):
        scoring.score_to_parquet(str(tmp_path / "*.gif"), ["piqe"], tmp_path / "t.parquet", progress=False)


def test_explicit_metrics_are_checked_before_any_work(tmp_path, monkeypatch):
    """One error on one line names every missing file of every metric; nothing is written."""
    monkeypatch.setenv("BANANA100_WEIGHTS", str(tmp_path / "no-weights"))
    _own_images(tmp_path / "mine")
    read = []
    monkeypatch.setattr(scoring.feed, "load_rgb", lambda data: read.append(1))
    with pytest.raises(WeightsNotFoundError) as exc:
        scoring.score_to_parquet(tmp_path / "mine", ["piqe", "niqe", "brisque", "topiq_nr"], tmp_path / "s.parquet",
                                 progress=False)
    msg = str(exc.value)
    assert "\n" not in msg and "ready: piqe" in msg
    for name in ("niqe: niqe_modelparameters.mat", "brisque: brisque_live_allmodel, brisque_live_allrange",
                 "topiq_nr: cfanet_nr_koniq_res50-9a73138b.pth, resnet50.a1_in1k.safetensors"):
        assert name in msg
    assert read == [] and not (tmp_path / "s.parquet.parts").exists()


def test_explicit_deep_metric_without_the_extra_is_named(tmp_path, monkeypatch):
    from banana100 import extras
    from banana100.errors import MissingExtraError

    real = extras.extra_installed
    monkeypatch.setattr(extras, "extra_installed", lambda extra: extra != "deep" and real(extra))
    _own_images(tmp_path / "mine")
    with pytest.raises(MissingExtraError, match=r"musiq, topiq_nr need the 'deep' extra .*pip install"):
        scoring.score_to_parquet(tmp_path / "mine", ["piqe", "musiq", "topiq_nr"], tmp_path / "s.parquet",
                                 progress=False)


def test_default_metrics_score_what_is_at_hand_and_name_the_rest(tmp_path, monkeypatch, capsys):
    from banana100.cli import main

    monkeypatch.setenv("BANANA100_WEIGHTS", str(tmp_path / "no-weights"))
    _own_images(tmp_path / "mine")
    assert main(["score", str(tmp_path / "mine"), "--out", str(tmp_path / "s.parquet"), "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "skipping niqe, brisque: parameter files not here" in err
    assert "(niqe: niqe_modelparameters.mat; brisque: brisque_live_allmodel, brisque_live_allrange)" in err
    assert set(pq.read_table(tmp_path / "s.parquet").column("metric").to_pylist()) == {"piqe"}


@pytest.mark.parametrize("what", ["folder", "other parquet", "not parquet"])
def test_an_unusable_out_is_refused_before_any_work(tmp_path, monkeypatch, capsys, what):
    """`score --out` at a folder (refused only after everything was scored) or at an existing file
    that is not a scores file (a traceback): one line naming it, no image read."""
    import pandas as pd

    from banana100.cli import main

    _own_images(tmp_path / "mine")
    out = tmp_path / "s.parquet"
    if what == "folder":
        out.mkdir()
    elif what == "other parquet":
        pd.DataFrame({"a": [1, 2]}).to_parquet(out)
    else:
        out.write_text("chain_id,score\n")
    read = []
    monkeypatch.setattr(scoring.feed, "load_rgb", lambda data: read.append(1))
    status = main(["score", str(tmp_path / "mine"), "--metrics", "piqe", "--out", str(out), "--device", "cpu"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and str(out) in err, err
    assert {"folder": "is a folder", "other parquet": "not a scores file of `banana100 score` (it lacks ",
            "not parquet": "not a Parquet file"}[what] in err
    assert read == [] and not (tmp_path / "s.parquet.parts").exists()


def test_an_empty_manifest_is_an_error_naming_it(tmp_path):
    records = make_run_folder(tmp_path / "run", steps=1, size=(100, 100))
    assert records
    (tmp_path / "run" / "manifest.jsonl").write_text("")
    with pytest.raises(ManifestError, match=r"run.manifest.jsonl: lists no image, so there is nothing to score"):
        scoring.score_to_parquet(tmp_path / "run", ["piqe"], tmp_path / "s.parquet", progress=False)
    assert not (tmp_path / "s.parquet").exists()


def test_chunks_are_never_smaller_than_a_metrics_largest_batch(tmp_path, monkeypatch):
    """A chunk is what each scorer gets in one call: with --batch-size 40 the chunks of 32 would
    cut every batch to 32 (VisualQuality-R1's memory-sized batch, up to 64, was capped so)."""
    make_run_folder(tmp_path / "run", steps=21, size=(64, 64))  # 44 images
    real, sizes = scoring.score_chunk, []
    monkeypatch.setattr(scoring, "score_chunk", lambda chunk, scorers, *up: sizes.append(len(chunk)) or real(chunk, scorers, *up))
    scoring.score_to_parquet(tmp_path / "run", ["piqe"], tmp_path / "a.parquet", batch_size=40, progress=False)
    assert sizes == [40, 4]
    sizes.clear()
    scoring.score_to_parquet(tmp_path / "run", ["piqe"], tmp_path / "b.parquet", progress=False)  # batches of 8
    assert sizes == [32, 12]
