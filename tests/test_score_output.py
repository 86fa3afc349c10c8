"""What `banana100 score` prints on stdout (issue 32, item 13): a table per metric, or this run's
rows as CSV or JSON alone for a pipe."""

import csv
import io
import json

import numpy as np
import pytest
from PIL import Image

from banana100.cli import main


@pytest.fixture
def images(tmp_path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray(rng.integers(0, 255, (128, 128, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(folder / "small.png")  # below PIQE's 96 px
    return folder


def _score(images, tmp_path, capsys, *extra):
    status = main(["score", str(images), "--metrics", "piqe", "--out", str(tmp_path / "s.parquet"), "--device", "cpu",
                   *extra])
    assert status == 0
    return capsys.readouterr()


def test_a_table_per_metric_after_writing(images, tmp_path, capsys):
    import pandas as pd

    out = _score(images, tmp_path, capsys).out.splitlines()
    assert out[0].split() == ["metric", "n", "failed", "mean", "min", "max", "better"]
    name, n, failed, mean, low, high, better = out[1].split()
    scores = pd.read_parquet(tmp_path / "s.parquet")["score"].dropna()
    assert (name, n, failed, better) == ("piqe", "3", "1", "lower")
    assert float(mean) == pytest.approx(scores.mean(), abs=1e-4)
    assert (float(low), float(high)) == (pytest.approx(scores.min(), abs=1e-4), pytest.approx(scores.max(), abs=1e-4))
    assert out[2] == f"scores written to {tmp_path / 's.parquet'}" and len(out) == 3


def test_the_table_says_how_weak_edit_damage_is_alone(images, tmp_path, capsys):
    """issue 33: the bare detector's measured limit is said under the number, not only in a log line."""
    from banana100.metrics.native.edit_damage_rel import _heldout_auc

    def table(*extra):
        assert main(["score", str(images), "--metrics", "edit_damage", "--out", str(tmp_path / f"{len(extra)}.parquet"),
                     "--device", "cpu", *extra]) == 0
        return capsys.readouterr().out

    alone = table()
    assert "note: edit_damage is scored without a reference" in alone and f"one figure a draw: {_heldout_auc()};" in alone
    assert "note:" not in table("--reference", str(images / "0.png"))  # edit_damage_rel beside it


def test_csv_and_json_put_the_rows_alone_on_stdout(images, tmp_path, capsys):
    got = _score(images, tmp_path, capsys, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(got.out)))
    assert len(rows) == 4 and {r["metric"] for r in rows} == {"piqe"}
    small = next(r for r in rows if r["image"].endswith("small.png"))
    assert small["score"] == "" and "needs at least 96x96 pixels" in small["error"]
    assert all(float(r["score"]) > 0 for r in rows if r is not small)
    assert "scores written to" in got.err
    again = _score(images, tmp_path, capsys, "--format", "json")  # resumes: nothing rescored, the same rows
    data = json.loads(again.out)
    assert [(d["image"], d["score"]) for d in data] == [(r["image"], float(r["score"]) if r["score"] else None)
                                                        for r in rows]
    assert data[0]["lower_better"] is True and data[0]["step"] is None


def test_only_process_0_of_a_distributed_run_prints(images, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RANK", "1")  # as accelerate / torchrun set it; the scoring itself runs alone here
    assert _score(images, tmp_path, capsys).out == ""
