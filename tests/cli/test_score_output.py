"""What `banana100 score` prints on stdout (issue 32, item 13): a table per metric, or this run's
rows as CSV or JSON alone for a pipe."""

import csv
import io
import json

import numpy as np
import pytest
from PIL import Image

from banana100.cli import main
from banana100.metrics.table import get_metric
from fixtures.runs import noise_images


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
    from banana100.metrics.detector import evidence

    def table(*extra):
        assert main(["score", str(images), "--metrics", "edit_damage", "--out", str(tmp_path / f"{len(extra)}.parquet"),
                     "--device", "cpu", *extra]) == 0
        return capsys.readouterr().out

    alone = table()
    assert "note: edit_damage is scored without a reference" in alone
    head = next(line for line in alone.splitlines() if line.startswith("  " + evidence.NOTE_HEAD[0]))
    assert head.split() == " ".join(evidence.NOTE_HEAD).split()  # the held-out figures as a table under it
    rows = {line[2:].split("  ")[0]: line for line in alone.splitlines() if line.startswith("  ")}
    assert float(rows["faint damage (step-5 stand-ins)"].split()[-1]) > 0.5
    assert all(cell in rows[evidence.MODEL_B_WORDS] for cell in evidence.model_b_row(evidence.results())[1:3])
    assert "note:" not in table("--reference", str(images / "0.png"))  # edit_damage_rel beside it


def test_a_csv_out_is_refused_before_any_work_and_says_how_to_get_csv(images, tmp_path, capsys, monkeypatch):
    """Before the default metrics' files are looked for (or fetched, online): the one line is the error."""
    monkeypatch.setenv("BANANA100_WEIGHTS", str(tmp_path / "no-weights"))
    status = main(["score", str(images), "--out", str(tmp_path / "s.csv"), "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status != 0 and len(err) == 1
    assert "s.csv: the scores file must end in .parquet" in err[0] and "--format csv" in err[0]
    assert [p.name for p in tmp_path.iterdir()] == [images.name]  # nothing written beside the images


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
    assert all(d["components"] is None for d in data)  # PIQE has none; edit_damage's: the next test


def test_only_process_0_of_a_distributed_run_prints(images, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RANK", "1")  # as accelerate / torchrun set it; the scoring itself runs alone here
    assert _score(images, tmp_path, capsys).out == ""


def test_the_scores_file_says_what_each_edit_damage_score_is_made_of(images, tmp_path, capsys):
    """A score read on its own needs its parts: the `components` column holds the detector's, per image, and
    their terms add up to the score; other metrics' rows, and an image too small to score, hold none."""
    import pandas as pd

    from banana100.metrics.engine.scorer import MetricScorer
    from banana100.metrics.detector import model as ed

    out = tmp_path / "s.parquet"
    assert main(["score", str(images), "--metrics", "edit_damage,piqe", "--out", str(out), "--device", "cpu"]) == 0
    df = pd.read_parquet(out)
    mine = df[df.metric == "edit_damage"].set_index(df[df.metric == "edit_damage"].image.map(lambda p: p.split("/")[-1]))
    assert mine.loc["small.png", "components"] is None and mine.loc["small.png", "error"]
    assert df[df.metric == "piqe"].components.isna().all()
    scorer = MetricScorer("edit_damage", device="cpu")
    names = ["0.png", "1.png", "2.png"]
    scored = scorer.measure_images([str(images / n) for n in names])
    for name, expected in zip(names, scored.components, strict=True):
        got = dict(mine.loc[name, "components"])
        # the column holds edit_damage_rel's own component too (since version 11), which the bare score does not measure
        assert {c: got.pop(c) for c in ed.REL_ONLY_UNITS} == {c: None for c in ed.REL_ONLY_UNITS}
        assert got == pytest.approx(expected, rel=1e-9)
        assert sum(ed.terms(got).values()) == pytest.approx(mine.loc[name, "score"], rel=1e-9)
    capsys.readouterr()
    assert main(["score", str(images), "--metrics", "edit_damage", "--out", str(out), "--format", "json"]) == 0
    piped = {d["image"].split("/")[-1]: d["components"] for d in json.loads(capsys.readouterr().out)}
    assert piped == {n: mine.loc[n, "components"] for n in [*names, "small.png"]}  # --format json carries them


def _breakdown(text: str, metric: str) -> dict[str, list[float]]:
    """{image: [score, *terms]} from the breakdown table printed for `metric`."""
    lines = text.split(f"\n{metric}, each score and ")[1].splitlines()
    from banana100.metrics.detector import model as ed
    from banana100.metrics.detector import relative as rel

    terms = rel.REL_TERMS if metric == rel.NAME else ed.TERMS  # the relative score reads colour edges too
    assert lines[1].split() == ["image", "score", *terms]
    rows = {}
    for line in lines[2:]:
        cells = line.split()
        if len(cells) != 2 + len(terms) or not cells[0].endswith(".png"):
            break
        rows[cells[0]] = [float(c) for c in cells[1:]]
    return rows


def test_the_table_breaks_each_edit_damage_score_into_its_terms(images, tmp_path, capsys, monkeypatch):
    import pandas as pd

    from banana100.cli import scoresout

    out = tmp_path / "s.parquet"
    assert main(["score", str(images), "--metrics", "edit_damage", "--reference", str(images / "0.png"), "--out",
                 str(out), "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    df = pd.read_parquet(out)
    for metric in ("edit_damage", "edit_damage_rel"):
        rows = _breakdown(text, metric)
        assert sorted(rows) == ["0.png", "1.png", "2.png"]  # small.png has no score, so no line
        for name, (score, *terms) in rows.items():
            assert sum(terms) == pytest.approx(score, abs=0.021)  # each printed to 0.01
            want = df[(df.metric == metric) & df.image.str.endswith("/" + name)].score.item()
            assert score == pytest.approx(want, abs=0.006)
    assert set(_breakdown(text, "edit_damage_rel")["0.png"]) == {0.0}  # the reference itself added nothing
    assert "film grain" in text.split("\nedit_damage_rel, ")[0]  # the bare score's caveat, under its own table
    # many images: where to find them, not a line each
    monkeypatch.setattr(scoresout, "MAX_BREAKDOWN", 2)
    assert main(["score", str(images), "--metrics", "edit_damage", "--out", str(out), "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "edit_damage: what each of the 3 scores is made of is in the scores file's `components` column" in text
    assert "each score and its terms" not in text


def test_a_scores_file_from_before_the_components_column_resumes_and_says_which_have_none(images, tmp_path, capsys):
    """edit_damage_rel rows written before the scores file kept components resume (the relative score has not
    changed since), and the breakdown says which have none."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "s.parquet"
    ref = ["--reference", str(images / "2.png"), "--device", "cpu"]
    assert main(["score", str(images / "0.png"), "--metrics", "edit_damage", "--out", str(out), *ref]) == 0
    t = pq.read_table(out)
    is_rel = pa.compute.equal(t["metric"], "edit_damage_rel")
    comps = pa.compute.if_else(is_rel, pa.nulls(len(t), t.schema.field("components").type), t["components"])
    pq.write_table(t.set_column(t.schema.get_field_index("components"), "components", comps), out)  # as before the column
    capsys.readouterr()
    assert main(["score", str(images / "0.png"), str(images / "1.png"), "--metrics", "edit_damage", "--out", str(out),
                 *ref]) == 0
    text = capsys.readouterr().out
    assert list(_breakdown(text, "edit_damage_rel")) == ["1.png"]
    assert "edit_damage_rel: 1 of the scores were written before the scores file kept their components" in text
    df = pd.read_parquet(out)
    rel = df[df["metric"] == "edit_damage_rel"].set_index("image")
    assert rel.loc[str(images / "0.png"), "components"] is None
    assert rel.loc[str(images / "1.png"), "components"]["grain"] >= 0


def test_edit_damage_scores_of_an_earlier_detector_are_refused_not_mixed(images, tmp_path, capsys):
    """The bare score's grain term is weighed by evenness since the evenness refit: rows scored before it (no
    evenness among their components, or no components at all) would not compare with new ones, so resuming
    edit_damage into such a file (one from before the version column: its version is read off its components)
    stops, naming it, and the file is left as it was."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "s.parquet"
    assert main(["score", str(images / "0.png"), "--metrics", "edit_damage", "--out", str(out), "--device", "cpu"]) == 0
    t = pq.read_table(out).drop(["version", "reference", "reference_sha256"])  # a file from before the columns
    fields = [f for f in t.schema.field("components").type if f.name != "evenness"]
    old = pa.array([None if c is None else {f.name: c[f.name] for f in fields} for c in t["components"].to_pylist()],
                   pa.struct(fields))
    for before in (t.set_column(t.schema.get_field_index("components"), "components", old), t.drop(["components"])):
        pq.write_table(before, out)
        capsys.readouterr()
        assert main(["score", str(images / "0.png"), str(images / "1.png"), "--metrics", "edit_damage", "--out",
                     str(out), "--device", "cpu"]) != 0
        err = capsys.readouterr().err
        assert str(out) in err and f"1 edit_damage score(s) made another way: backend='native', mode='pyiqa', precision='exact', version 1 there; backend='native', mode='pyiqa', precision='exact', version {get_metric('edit_damage').version} now (an earlier version" in err
        assert "another --out" in err
        assert pq.read_table(out).num_rows == 1  # nothing added, nothing lost
    # a file of this version resumes
    assert main(["score", str(images / "0.png"), "--metrics", "edit_damage", "--out", str(tmp_path / "new.parquet"),
                 "--device", "cpu"]) == 0
    assert main(["score", str(images / "0.png"), str(images / "1.png"), "--metrics", "edit_damage", "--out",
                 str(tmp_path / "new.parquet"), "--device", "cpu"]) == 0


def test_rows_added_to_a_file_of_another_folder_are_said(images, tmp_path, capsys):
    """Issue 44 item 5: 5 rows were already there and the table said `piqe 9` without a word."""
    other = noise_images(tmp_path / "other", ("o0.png", "o1.png"), seed=1)
    out = tmp_path / "s.parquet"
    assert main(["score", str(other), "--metrics", "piqe", "--out", str(out), "--device", "cpu"]) == 0
    capsys.readouterr()
    assert main(["score", str(images), "--metrics", "piqe", "--out", str(out), "--device", "cpu"]) == 0
    got = capsys.readouterr()
    said = [line for line in got.err.splitlines() if "already holds" in line]
    assert said == [f"banana100 score: warning: {out} already holds 2 row(s) of 2 image(s) that this run does not "
                    "score: this run's rows are added to that file (its table counts this run's images only); give "
                    "a new --out to keep them apart"]
    assert got.out.splitlines()[1].split()[:3] == ["piqe", "3", "1"]  # this run's 4 images, not 6
    # resuming the same folder says nothing
    assert main(["score", str(images), "--metrics", "piqe", "--out", str(out), "--device", "cpu"]) == 0
    assert "already holds 2" in capsys.readouterr().err  # the other folder's rows are still there: said again
    assert main(["score", str(other), str(images), "--metrics", "piqe", "--out", str(out), "--device", "cpu"]) == 0
    assert "already holds" not in capsys.readouterr().err


@pytest.mark.parametrize("what", ["missing", "folder", "not an image", "too small", "no edit_damage"])
def test_a_bad_reference_is_a_usage_error_before_any_work(images, tmp_path, capsys, what):
    """Issue 44 item 11: a missing file, a folder or a non-image gave one error row per image with rc 0;
    --reference without edit_damage was ignored."""
    ref = {"missing": tmp_path / "nope.png", "folder": images, "not an image": tmp_path / "text.png",
           "too small": images / "small.png", "no edit_damage": images / "0.png"}[what]
    (tmp_path / "text.png").write_text("not an image")
    metrics = "piqe" if what == "no edit_damage" else "edit_damage"
    out = tmp_path / "r.parquet"
    status = main(["score", str(images / "1.png"), "--metrics", metrics, "--reference", str(ref), "--out", str(out),
                   "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and err[0].startswith(f"banana100 score: error: --reference {ref}")
    assert {"missing": "no such file", "folder": "is a folder", "not an image": "not an image",
            "too small": "needs at least 64x64 pixels", "no edit_damage": "add it to --metrics"}[what] in err[0]
    assert not out.exists() and not out.with_name(out.name + ".parts").exists()
