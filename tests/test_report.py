"""The report on a hand-made scores file: the table, the plot, bad input."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from banana100.errors import Banana100Error
from banana100.report import write_report
from banana100.scoring import SCORES_SCHEMA


def _rows(metric, lower_better, chains):
    rows = []
    for cid, values in chains.items():
        for step, score in enumerate(values):
            rows.append({
                "chain_id": cid, "source_id": cid.split("__")[0], "setting": "replicate", "repeat": 0, "step": step,
                "editor": "simulated", "model": "simulated-v1", "sha256": f"{cid}{step}", "image": f"{cid}/{step}.png",
                "width": 8, "height": 8, "metric": metric, "score": score, "lower_better": lower_better, "error": None,
            })
    return rows


@pytest.fixture
def scores_file(tmp_path):
    steps = 21
    rising = [float(s) for s in range(steps)]  # higher raw score at every step
    falling = [float(steps - s) for s in range(steps)]
    rows = _rows("niqe", True, {"a__replicate__r0": rising, "b__replicate__r0": falling})  # a passes, b fails
    rows += _rows("musiq", False, {"a__replicate__r0": falling, "b__replicate__r0": falling[:6]})  # b incomplete
    path = tmp_path / "scores.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCORES_SCHEMA), path)
    return path


def test_report_table_plot_and_summary(scores_file, tmp_path):
    report = write_report(scores_file, tmp_path / "report")
    text = report.read_text()
    assert "| niqe | lower better | 2 | 1 | 1 | 0 | 50 % |" in text
    assert "| musiq | higher better | 2 | 1 | 0 | 1 | 0 % |" in text
    assert "simulated" in text and "BRISQUE" in text  # the simulated-editor caveat
    assert "| b__replicate__r0 | incomplete (steps 10, 20 absent) |" in text
    with Image.open(tmp_path / "report" / "sensitivity.png") as img:
        assert img.width > 400 and img.height > 200
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["niqe"]["failure_rate"] == 0.5
    assert summary["musiq"]["incomplete_chains"] == ["b__replicate__r0"]


def test_report_refuses_missing_or_bad_file(tmp_path):
    with pytest.raises(Banana100Error, match="no such scores file"):
        write_report(tmp_path / "absent.parquet", tmp_path / "r")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(Banana100Error, match="bad.parquet: not a readable Parquet"):
        write_report(bad, tmp_path / "r")


def test_missing_scores_are_listed_with_their_error(tmp_path):
    rows = _rows("niqe", True, {"a__replicate__r0": [9.0 - s / 10 for s in range(21)],
                                "b__replicate__r0": [9.0 - s / 10 for s in range(21)]})
    for r in rows:
        if r["chain_id"] == "b__replicate__r0" and r["step"] == 1:
            r["score"], r["error"] = float("nan"), "runs/b/step_001.png: NIQE is undefined for a uniform image"
        if r["chain_id"] == "a__replicate__r0" and r["step"] == 7:
            r["score"], r["error"] = float("nan"), "runs/a/step_007.png: 400,000,000 pixels exceeds the image size limit"
    path = tmp_path / "scores.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCORES_SCHEMA), path)
    text = write_report(path, tmp_path / "report").read_text()
    assert "## Missing scores" in text and "2 (image, metric) pairs have no score" in text
    assert "incomplete chains: b__replicate__r0 (no score at step 1)" in text
    assert "| b__replicate__r0 | 1 | runs/b/step_001.png: NIQE is undefined for a uniform image |" in text
    assert "| a__replicate__r0 | 7 | runs/a/step_007.png: 400,000,000 pixels exceeds" in text
    assert "| b__replicate__r0 | incomplete (no score at step 1) |" in text
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["niqe"]["undefined_scores"] == [{"chain_id": "a__replicate__r0", "step": 7},
                                                   {"chain_id": "b__replicate__r0", "step": 1}]
    assert summary["niqe"]["n_failed"] == 1 and summary["niqe"]["n_incomplete"] == 1  # a: NaN at 7 is not needed


def test_report_takes_the_direction_from_the_scores_file(tmp_path):
    """The same numbers judged as PIQE (lower better, as the file says) and as a higher-better metric."""
    rising = [float(s) for s in range(21)]
    rows = _rows("piqe", True, {"a__replicate__r0": rising}) + _rows("musiq", False, {"a__replicate__r0": rising})
    path = tmp_path / "scores.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCORES_SCHEMA), path)
    summary = json.loads((write_report(path, tmp_path / "r").parent / "summary.json").read_text())
    assert (summary["piqe"]["n_passed"], summary["musiq"]["n_failed"]) == (1, 1)
    mixed = _rows("piqe", True, {"a__replicate__r0": rising}) + _rows("piqe", False, {"b__replicate__r0": rising})
    pq.write_table(pa.Table.from_pylist(mixed, schema=SCORES_SCHEMA), path)
    with pytest.raises(Banana100Error, match="piqe: the lower_better column holds both True and False"):
        write_report(path, tmp_path / "r2")


def test_report_explains_terms_step0_jump_and_saturation(tmp_path):
    # PIQE (0..100, lower better): the clean source at 100 (saturated), then the copies at 20..40
    piqe = [100.0] + [20.0 + s for s in range(20)]
    rows = _rows("piqe", True, {"a__replicate__r0": piqe, "b__replicate__r0": piqe})
    path = tmp_path / "scores.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCORES_SCHEMA), path)
    text = write_report(path, tmp_path / "r").read_text()
    assert "## Reading this report" in text and "**d_k** = oriented score at step k" in text
    assert "**Oriented score**" in text and "Spearman" in text
    assert "**Step-0 jump (piqe)**: in 2 of 2 chains the clean source scores far worse" in text
    assert "**Saturated (piqe)**: 2 of 42 scores sit at the end of its range (100)" in text
    # a smooth chain with no jump and no score at a range end gets neither note
    calm = _rows("piqe", True, {"a__replicate__r0": [20.0 + s for s in range(21)]})
    pq.write_table(pa.Table.from_pylist(calm, schema=SCORES_SCHEMA), path)
    text = write_report(path, tmp_path / "r3").read_text()
    assert "Step-0 jump" not in text and "Saturated" not in text


def test_ten_step_chains_with_their_own_check_steps(tmp_path, capsys):
    """A ten-step release (the supplement's sequences): the CLI's --check-steps/--reference-step reach
    the protocol, and the report says which steps were checked."""
    from banana100.cli import main

    rising = [float(s) for s in range(11)]  # steps 0-10
    rows = _rows("niqe", True, {"a__replicate__r0": rising, "b__replicate__r0": rising[:6]})
    path = tmp_path / "scores.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCORES_SCHEMA), path)

    assert main(["report", str(path), "--out", str(tmp_path / "default")]) == 0
    summary = json.loads((tmp_path / "default" / "summary.json").read_text())
    assert summary["niqe"]["n_incomplete"] == 2  # step 20 is absent from both

    assert main(["report", str(path), "--out", str(tmp_path / "ten"), "--check-steps", "2,5,10",
                 "--reference-step", "1"]) == 0
    assert "steps checked: 2, 5, 10 against step 1" in capsys.readouterr().out
    summary = json.loads((tmp_path / "ten" / "summary.json").read_text())
    assert summary["niqe"]["check_steps"] == [2, 5, 10] and summary["niqe"]["n_passed"] == 1
    assert summary["niqe"]["incomplete_chains"] == ["b__replicate__r0"]  # stops at step 5
    text = (tmp_path / "ten" / "report.md").read_text()
    assert "every check step (2, 5, 10) is strictly worse than at step 1" in text
    assert "| b__replicate__r0 | incomplete (steps 10 absent) |" in text or "incomplete (step 10 absent)" in text

    with pytest.raises(SystemExit) as bad:
        main(["report", str(path), "--out", str(tmp_path / "bad"), "--check-steps", "two"])
    assert bad.value.code == 2


def test_a_step_column_stored_as_text_is_read_as_numbers_or_named(scores_file, tmp_path):
    """Steps written as text ("5") judged no chain and exited 0: they are numbers now; a step that
    is not a whole number is one error naming the file."""
    import pandas as pd

    df = pd.read_parquet(scores_file)
    text = tmp_path / "text_steps.parquet"
    df.assign(step=df["step"].astype(str)).to_parquet(text)
    report = write_report(text, tmp_path / "report").read_text()
    assert "| niqe | lower better | 2 | 1 | 1 | 0 | 50 % |" in report
    bad = tmp_path / "bad_steps.parquet"
    df.assign(step=["five"] + df["step"].astype(str).tolist()[1:]).to_parquet(bad)
    with pytest.raises(Banana100Error, match=r"bad_steps.parquet: the `step` column holds 'five' \(1 such rows\)"):
        write_report(bad, tmp_path / "r2")
    half = tmp_path / "half.parquet"
    df.assign(step=df["step"] + 0.5).to_parquet(half)
    with pytest.raises(Banana100Error, match="half.parquet: the `step` column holds 0.5"):
        write_report(half, tmp_path / "r3")


def _one_metric(tmp_path, name, **method):
    """A scores file of one metric whose rows carry the given columns (precision, version, ...)."""
    steps = [float(21 - k) for k in range(21)]
    rows = [{**r, **method} for r in _rows("edit_damage", True, {f"{name}__replicate__r0": steps})]
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCORES_SCHEMA), path)
    return path


def test_report_refuses_what_score_refuses_to_mix(tmp_path):
    """Issue 44 item 2: an earlier detector's edit_damage rows beside current ones, or fast rows beside exact
    ones, were reported together (rc 0, no warning)."""
    import pandas as pd

    from banana100.errors import DatasetError
    from banana100.leaderboard import write_leaderboard

    old = _one_metric(tmp_path, "old", version=1, backend="native", mode="pyiqa", precision="exact")
    new = _one_metric(tmp_path, "new", version=2, backend="native", mode="pyiqa", precision="exact")
    with pytest.raises(DatasetError, match=r"old.parquet and new.parquet: the edit_damage scores were made two ways "
                                           r"\(version 1: 21 rows in old.parquet; version 2: 21 rows in new.parquet\)"):
        write_leaderboard([old, new], tmp_path / "lb", by=[])
    fast = _one_metric(tmp_path, "fast", version=2, backend="native", mode="pyiqa", precision="fast")
    both = tmp_path / "both.parquet"
    pd.concat([pd.read_parquet(new), pd.read_parquet(fast)]).to_parquet(both)
    with pytest.raises(DatasetError, match=r"both.parquet: the edit_damage scores were made two ways \(precision "
                                           r"'exact': 21 rows; precision 'fast': 21 rows\)"):
        write_report(both, tmp_path / "r")
    # a file from before the version column: its edit_damage rows without evenness are version 1
    legacy = pd.read_parquet(old).drop(columns=["version"])
    legacy["components"] = [{"grain": 1.0}] * len(legacy)
    legacy.to_parquet(tmp_path / "legacy.parquet")
    with pytest.raises(DatasetError, match="version 1: 21 rows in legacy.parquet"):
        write_leaderboard([tmp_path / "legacy.parquet", new], tmp_path / "lb", by=[])
    assert write_report(new, tmp_path / "ok").is_file()  # one way: reported


def test_bad_report_options_are_one_line(scores_file, tmp_path, capsys):
    """Issue 44 item 8: --check-steps with the reference step gave a ValueError traceback; --out naming a file,
    a raw [Errno 17]."""
    from banana100.cli import main

    assert main(["report", str(scores_file), "--check-steps", "1,2,4", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["banana100 report: error: --check-steps 1,2,4: contains the reference step 1 (--reference-step), "
                   "which each check step is compared with; give steps after it (the paper's: 5,10,20; ten-step "
                   "releases: 2,5,10)"]
    assert not (tmp_path / "r").exists()
    taken = tmp_path / "taken"
    taken.write_text("a file")
    for extra in ([], ["--by", "setting"]):
        assert main(["report", str(scores_file), "--out", str(taken), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--out {taken}: is a file; --out is the folder the report is written" in err[0]


@pytest.mark.parametrize("n_metrics", [1, 2, 3, 4, 5, 7])
def test_the_plot_has_a_panel_per_metric_and_hides_the_spare_ones(tmp_path, n_metrics):
    """Panels come three to a row: 4, 5 or 7 metrics leave spare panels in the last row (the demo's
    four metrics did), which are hidden, not zipped against the metrics."""
    import pandas as pd
    from matplotlib.image import imread

    from banana100.report import plot

    metrics = [f"m{i}" for i in range(n_metrics)]
    df = pd.DataFrame([{"metric": m, "lower_better": True, "chain_id": "c", "step": s, "score": float(s)}
                       for m in metrics for s in range(4)])
    results = {m: {"check_steps": [2, 3], "failure_rate": 0.0} for m in metrics}
    path = plot(df, results, tmp_path / "p.png")
    assert imread(path).shape[0] > 100
