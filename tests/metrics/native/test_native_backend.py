"""The native backend wired into the engine, the evaluate modules, scoring and the weights store.

The agreement of each native metric with pyiqa and with the original releases is tested in
tests/test_native_<metric>.py; here: which backend runs, how `backend` and `mode` reach it,
what is refused, and what the scores file records.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from banana100.testing.runfolder import make_run_folder

import banana100.scoring as scoring
from banana100.metrics import native, weights
from banana100.metrics.engine.scorer import MetricScorer
from banana100.errors import Banana100Error, WeightsNotFoundError
from banana100.imageio import load_rgb
from banana100.metrics.table import CLASSICAL, ROSTER, get_metric

from fixtures.repopaths import REPO
I04 = REPO.parent / "shared" / "reference-images" / "tid2013" / "I04.bmp"


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1.0)


def test_every_hand_crafted_metric_is_native_by_default_and_no_deep_one_is():
    native_dir = Path(native.__file__).parent
    assert [n for n in ROSTER if get_metric(n).native] == list(CLASSICAL)
    for name in CLASSICAL:  # the table's flag and the modules agree
        assert (native_dir / f"{name}.py").is_file(), name
    with pytest.raises(ValueError, match="no native implementation of 'musiq'"):
        native.build("musiq", {})
    for name in ROSTER:
        spec = get_metric(name)
        assert spec.default_backend == ("native" if name in CLASSICAL else "pyiqa")
        assert "pyiqa" in spec.backends


def test_brisque_backends_read_different_files():
    spec = get_metric("brisque")
    assert [wf.filename for wf in spec.backend_files()] == ["brisque_live_allmodel", "brisque_live_allrange"]
    assert [wf.filename for wf in spec.backend_files("pyiqa")] == ["brisque_svm_weights.pth"]
    assert {wf.filename for wf in spec.all_files} == {"brisque_live_allmodel", "brisque_live_allrange",
                                                      "brisque_svm_weights.pth"}


def test_scorer_picks_the_backend(weights_from_shared):
    rgb = load_rgb(I04)
    by_backend = {}
    for backend in ("native", "pyiqa", None):
        scorer = MetricScorer("niqe", device="cpu", backend=backend)
        assert scorer.backend == (backend or "native")
        by_backend[backend] = scorer.score_arrays([rgb])[0]
        assert f"backend={scorer.backend!r}" in repr(scorer)
    assert type(MetricScorer("niqe", device="cpu").model).__module__.startswith("banana100.metrics.native")
    assert by_backend[None] == by_backend["native"]
    assert rel(by_backend["native"], by_backend["pyiqa"]) < 1e-3
    official = MetricScorer("niqe", device="cpu", mode="official").score_arrays([rgb])[0]
    assert rel(official, 3.65492152353770) < 5e-3  # LIVE MATLAB's score of I04


@pytest.mark.parametrize("kwargs, message", [
    (dict(metric="cnniqa", backend="native"), "backend must be one of ('pyiqa',)"),
    (dict(metric="niqe", backend="matlab"), "backend must be one of ('native', 'pyiqa')"),
    (dict(metric="niqe", mode="matlab"), "mode must be one of ('pyiqa', 'official')"),
    (dict(metric="niqe", backend="pyiqa", mode="official"), "mode='official' needs the native backend"),
])
def test_bad_backend_or_mode_is_refused_with_the_choices(weights_from_shared, kwargs, message):
    with pytest.raises(ValueError) as e:
        MetricScorer(device="cpu", **kwargs)
    assert message in str(e.value)


def test_native_brisque_names_its_missing_live_file(tmp_path, monkeypatch):  # offline: conftest
    monkeypatch.setenv(weights.ENV_VAR, str(tmp_path))
    with pytest.raises(WeightsNotFoundError) as e:
        MetricScorer("brisque", device="cpu")
    assert "brisque_live_allmodel" in str(e.value) and "utlive/BRISQUE" in str(e.value)


def test_native_metrics_batch_whatever_the_table_says_of_pyiqa(weights_from_shared):
    # pyiqa's BRISQUE and IL-NIQE archs are not batchable; the native modules always are
    assert not get_metric("brisque").batchable
    assert MetricScorer("brisque", device="cpu").batchable
    assert not MetricScorer("brisque", device="cpu", backend="pyiqa").batchable


def test_scores_file_records_backend_and_mode_and_refuses_to_mix(tmp_path, weights_from_shared):
    make_run_folder(tmp_path / "run", steps=2, size=(100, 120))
    out = tmp_path / "s.parquet"
    scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe"], out, device="cpu", progress=False)
    rows = pq.read_table(out).to_pylist()
    assert {(r["backend"], r["mode"]) for r in rows} == {("native", "pyiqa")}
    with pytest.raises(Banana100Error) as e:
        scoring.score_to_parquet(tmp_path / "run", ["niqe"], out, device="cpu", progress=False, mode="official")
    assert "backend='native', mode='pyiqa'" in str(e.value) and "mode='official'" in str(e.value)
    # a new file with official mode; a deep metric without one is scored (and recorded) in pyiqa mode
    off = tmp_path / "official.parquet"
    scoring.score_to_parquet(tmp_path / "run", ["niqe"], off, device="cpu", progress=False, mode="official")
    assert {r["mode"] for r in pq.read_table(off).to_pylist()} == {"official"}


def test_scores_files_from_before_the_backend_columns_still_resume(tmp_path, weights_from_shared):
    make_run_folder(tmp_path / "run", steps=1, size=(100, 120))
    out = tmp_path / "s.parquet"
    scoring.score_to_parquet(tmp_path / "run", ["piqe"], out, device="cpu", progress=False, backend="pyiqa")
    old = pq.read_table(out).drop_columns(["backend", "mode"])
    pq.write_table(old, out)
    scoring.score_to_parquet(tmp_path / "run", ["piqe", "niqe"], out, device="cpu", progress=False, backend="pyiqa")
    table = pq.read_table(out)
    assert table.num_rows == 2 * old.num_rows
    assert set(table.column("backend").to_pylist()) == {"pyiqa"}


def test_cli_score_takes_backend_and_mode(tmp_path, weights_from_shared):
    from banana100.cli import main

    make_run_folder(tmp_path / "run", steps=1, size=(100, 120))
    main(["score", str(tmp_path / "run"), "--metrics", "niqe", "--out", str(tmp_path / "s.parquet"),
          "--device", "cpu", "--mode", "official"])
    assert set(pq.read_table(tmp_path / "s.parquet").column("mode").to_pylist()) == {"official"}
    with pytest.raises(SystemExit):
        main(["score", str(tmp_path / "run"), "--metrics", "niqe", "--out", str(tmp_path / "t.parquet"),
              "--backend", "matlab"])
