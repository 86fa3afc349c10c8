"""The engine's feed (issue 30): uint8 batches uploaded once, converted to float and checked for
uniform images (a look at the first pixels on the host, the full check on the device), bit for bit what the CPU path gave; `score --metrics a,b,c`
uploads each batch once for every metric."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from banana100.metrics.engine import upload
from banana100.metrics.engine.scorer import MetricScorer, to_tensor
from banana100.metrics.engine.upload import Uploader, look_up, to_float, uniform_colours
from banana100.testing.images import chain_images


def _images():
    rng = np.random.default_rng(0)
    imgs = [rng.integers(0, 256, (37, 53, 3), dtype=np.uint8) for _ in range(3)]
    every_level = np.arange(256 * 3, dtype=np.uint16).reshape(16, 16, 3).astype(np.uint8)
    imgs.append(np.pad(every_level, ((0, 21), (0, 37), (0, 0))))
    late = np.full((37, 53, 3), 9, np.uint8)
    late[-1, -1] = (9, 9, 10)  # uniform in its first 4096 pixels, not in full
    return imgs + [np.full((37, 53, 3), 7, np.uint8), late]


def test_float_conversion_equals_to_tensor_bit_for_bit_on_both_paths():
    imgs = _images()
    batch = Uploader(torch.device("cpu")).upload(imgs)
    expected = torch.stack([to_tensor(a) for a in imgs])
    for x in (to_float(batch.pixels), look_up(batch.pixels)):  # the CPU's division, the GPU's table
        assert x.dtype == torch.float32 and x.is_contiguous() and x.shape == expected.shape
        assert torch.equal(x, expected)


def test_uniform_check_on_the_device_batch():
    imgs = _images()
    pixels = Uploader(torch.device("cpu")).upload(imgs).pixels
    assert uniform_colours(pixels) == [None, None, None, None, (7, 7, 7), None]
    big = np.full((80, 80, 3), 200, np.uint8)  # over 4096 pixels, uniform throughout
    assert uniform_colours(torch.from_numpy(big)[None]) == [(200, 200, 200)]


def test_only_images_the_host_cannot_rule_out_are_checked_on_the_device(monkeypatch):
    """The host looks at the first 4096 pixels while copying: a batch of ordinary images needs no
    device check (no wait for its copy); an image uniform in its prefix is checked in full there."""
    checked = []
    real = upload.uniform_colours
    monkeypatch.setattr(upload, "uniform_colours", lambda px: checked.append(px.clone()) or real(px))
    ordinary = chain_images(3, 96)
    assert Uploader(torch.device("cpu")).upload(ordinary).colours() == [None, None, None]
    assert checked == []
    late = np.full((96, 96, 3), 9, np.uint8)  # 9216 pixels: uniform in its first 4096, not in full
    late[-1, -1] = (9, 9, 10)
    flat = np.full((96, 96, 3), 200, np.uint8)
    batch = Uploader(torch.device("cpu")).upload([ordinary[0], late, ordinary[1], flat])
    assert batch.colours() == [None, None, None, (200, 200, 200)]
    assert len(checked) == 1 and torch.equal(checked[0], torch.from_numpy(np.stack([late, flat])))
    assert batch.take([3, 1]).colours() == [(200, 200, 200), None] and len(checked) == 1  # shared


def test_a_batch_takes_views_or_gathers_and_keeps_its_check():
    batch = Uploader(torch.device("cpu")).upload(_images())
    colours = batch.colours()
    part = batch.take([1, 2])
    assert part.pixels.data_ptr() == batch.pixels[1].data_ptr()  # consecutive: a view, no copy
    gathered = batch.take([0, 4])
    assert torch.equal(gathered.pixels, batch.pixels[[0, 4]]) and gathered.colours() == [colours[0], colours[4]]


def test_measure_uploaded_equals_score_arrays(weights_from_shared):
    imgs = chain_images(3, 128) + [np.full((128, 128, 3), 50, np.uint8)]
    for name in ("niqe", "piqe"):
        s = MetricScorer(name, device="cpu", batch_size=2)
        try:
            direct = s.score_arrays(imgs)
        except Exception as e:  # a uniform image: undefined for some metrics
            direct = e.scores
        batch = s.uploader.upload(imgs)
        try:
            shared = s.measure_uploaded(batch, [f"i{k}" for k in range(4)]).values()
        except Exception as e:
            shared = e.scores
        assert shared == direct


def test_score_with_several_metrics_uploads_each_batch_once(tmp_path, weights_from_shared, monkeypatch):
    import pyarrow.parquet as pq

    from banana100 import scoring
    from banana100.testing.runfolder import make_run_folder

    make_run_folder(tmp_path / "run", steps=5, size=(100, 120))  # 12 images of one size
    uploads, checks = [], []
    real_upload, real_check = Uploader.upload, upload.uniform_colours
    monkeypatch.setattr(Uploader, "upload", lambda self, rgbs: uploads.append(len(rgbs)) or real_upload(self, rgbs))
    monkeypatch.setattr(upload, "uniform_colours", lambda px: checks.append(len(px)) or real_check(px))
    out = scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe", "brisque"], tmp_path / "s.parquet",
                                   device="cpu", chunk_size=8, progress=False)
    assert uploads == [8, 4]  # one upload per chunk (one size), not one per metric
    assert checks == []  # chain images differ in their first pixels: ruled out on the host, no device check
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 36 and all(r["error"] is None for r in rows)
    for metric in ("piqe", "niqe", "brisque"):
        files = sorted((r["image"], r["score"]) for r in rows if r["metric"] == metric)
        direct = MetricScorer(metric, device="cpu").score([str(tmp_path / "run" / f) for f, _ in files])
        assert [s for _, s in files] == direct


def test_upload_conversion_and_check_on_each_device(device):
    """On CUDA: pinned memory, a side stream, the table look-up: still to_tensor's values bit for bit."""
    imgs = _images()
    uploader = Uploader(torch.device(device))
    batches = [uploader.upload(imgs), uploader.upload(imgs[::-1])]  # the second copy overlaps the first's use
    expected = torch.stack([to_tensor(a) for a in imgs])
    assert torch.equal(to_float(batches[0].pixels).cpu(), expected)
    assert torch.equal(to_float(batches[1].take([5, 4, 3, 2, 1, 0]).pixels).cpu(), expected)
    assert batches[0].colours() == [None, None, None, None, (7, 7, 7), None]
    assert batches[1].take([1, 3]).colours() == [(7, 7, 7), None]


def test_engine_scores_equal_on_each_device_through_several_batches(device):
    """Many batches queued before the one transfer back: every score in its place."""
    class Mean(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=(1, 2, 3))

    imgs = [np.clip(chain_images(1, 64)[0].astype(int) + k, 0, 255).astype(np.uint8) for k in range(7)]
    s = MetricScorer.from_model("cnniqa", Mean(), device=device, batch_size=2)
    expected = [float(torch.stack([to_tensor(a) for a in imgs]).mean(dim=(1, 2, 3))[k]) for k in range(7)]
    assert s.score_arrays(imgs) == pytest.approx(expected, rel=1e-6)
    assert s.measure_uploaded(s.uploader.upload(imgs), [str(k) for k in range(7)]).scores == pytest.approx(expected,
                                                                                             rel=1e-6)


def test_uploads_ahead_run_in_a_thread_in_order_and_pass_errors_on(monkeypatch):
    """`Uploader.ahead`: the next batch is copied and uploaded by a thread while the caller
    computes this one; batches come back in order, and an upload's error reaches the caller."""
    import threading

    uploader = Uploader(torch.device("cpu"))
    threads, real = [], Uploader.upload
    monkeypatch.setattr(Uploader, "upload", lambda self, rgbs: threads.append(threading.get_ident()) or real(self, rgbs))
    imgs = chain_images(5, 64)
    chunks = [([0, 1], imgs[:2]), ([2], imgs[2:3]), ([3, 4], imgs[3:])]
    got = list(uploader.ahead(iter(chunks)))
    assert [key for key, _ in got] == [[0, 1], [2], [3, 4]]
    assert all(torch.equal(batch.pixels, torch.from_numpy(np.stack(arrays))) for (_, arrays), (_, batch) in zip(chunks, got, strict=True))
    assert threads and threading.get_ident() not in threads

    def broken():
        yield [0], imgs[:1]
        yield [1], [np.zeros((64, 64), np.uint8)]  # not HxWx3: the upload fails

    it = uploader.ahead(broken())
    assert next(it)[0] == [0]
    with pytest.raises(ValueError):
        next(it)


def test_score_uploads_the_next_chunk_while_this_one_is_scored(tmp_path, monkeypatch):
    """`banana100 score`: chunk k+1 is uploaded by a thread while chunk k is scored (the device
    does not wait for the host's copy between chunks), each group once, every row as before."""
    import threading

    import pyarrow.parquet as pq

    from banana100 import scoring
    from banana100.testing.runfolder import make_run_folder

    make_run_folder(tmp_path / "run", steps=5, size=(100, 120))  # 12 images: chunks of 4
    uploads, second_chunk_uploaded = [], threading.Event()
    real_upload, real_score = Uploader.upload, scoring.score_chunk

    def upload_spy(self, rgbs):
        uploads.append(threading.get_ident())
        batch = real_upload(self, rgbs)
        if len(uploads) == 2:
            second_chunk_uploaded.set()
        return batch

    def score_spy(chunk, scorers, *up):
        if not second_chunk_uploaded.is_set():  # scoring chunk 0: chunk 1 must arrive meanwhile
            assert second_chunk_uploaded.wait(30), "chunk 1 was not uploaded while chunk 0 was scored"
        return real_score(chunk, scorers, *up)

    monkeypatch.setattr(Uploader, "upload", upload_spy)
    monkeypatch.setattr(scoring, "score_chunk", score_spy)
    out = scoring.score_to_parquet(tmp_path / "run", ["piqe", "edit_damage"], tmp_path / "s.parquet",
                                   device="cpu", chunk_size=4, progress=False)
    assert len(uploads) == 3 and threading.get_ident() not in uploads  # one per chunk, all in the thread
    rows = pq.read_table(out).to_pylist()
    metrics = {r["metric"] for r in rows}  # edit_damage brings edit_damage_rel along for chains
    assert {"piqe", "edit_damage"} <= metrics and len(rows) == 12 * len(metrics)
    assert all(r["error"] is None for r in rows)
