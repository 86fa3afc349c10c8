"""`banana100 score`: rows per image and metric, resume, isolated failures, named errors."""

import pyarrow.parquet as pq
import pytest

import banana100.scoring as scoring
from banana100.metrics.engine import MetricScorer
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
    direct = dict(zip([(r["chain_id"], r["step"]) for r in records], niqe.score(files)))
    for row in table:
        if row["metric"] == "niqe":
            assert row["score"] == pytest.approx(direct[(row["chain_id"], row["step"])], rel=1e-12)
            assert row["lower_better"] is True and row["error"] is None


def test_resume_after_interruption_scores_only_what_is_left(tmp_path, weights_from_shared, monkeypatch):
    records = make_run_folder(tmp_path / "run", steps=9, size=(100, 100))  # 20 images
    out = tmp_path / "s.parquet"
    real = scoring._score_chunk
    calls = []

    def interrupted(chunk, scorers):
        calls.append(len(chunk))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(chunk, scorers)

    monkeypatch.setattr(scoring, "_score_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe"], out, chunk_size=4, progress=False)
    assert not out.exists()
    assert len(list((tmp_path / "s.parquet.parts").glob("part-*.parquet"))) == 2  # 8 images kept

    counted = []
    monkeypatch.setattr(scoring, "_score_chunk", lambda chunk, scorers: counted.append(len(chunk)) or real(chunk, scorers))
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
    real = scoring.load_rgb
    monkeypatch.setattr(scoring, "load_rgb", lambda data: threads.append(threading.get_ident()) or real(data))
    inline = list(scoring.decoded_images(tmp_path / "run", ["piqe"], done, workers=0))
    assert threads and set(threads) == {threading.get_ident()}
    threads.clear()
    for rank, world in ((0, 1), (1, 2)):
        inline = list(scoring.decoded_images(tmp_path / "run", ["piqe"], done, rank, world, workers=0))
        workers = list(scoring.decoded_images(tmp_path / "run", ["piqe"], done, rank, world, workers=2))
        assert [(d.record["chain_id"], d.record["step"], d.needed) for d in workers] == \
               [(d.record["chain_id"], d.record["step"], d.needed) for d in inline]
        assert all((a.rgb is None and b.rgb is None) or (a.rgb == b.rgb).all() for a, b in zip(workers, inline))
    assert set(threads) - {threading.get_ident()}, "workers=2 decoded nothing off the calling thread"
    assert len(inline) == len(records) // 2
    assert [d.needed for d in scoring.decoded_images(tmp_path / "run", ["piqe"], done, workers=2)][1] == []
