"""The leaderboard (`banana100 report SCORES... --by ...`): merging, grouping, the files written."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from banana100.errors import Banana100Error, UsageError
from banana100.leaderboard import leaderboard, merge_scores, write_leaderboard

STEPS = (0, 1, 5, 10, 20)


def _scores(path, editor, model, settings, metric="niqe", lower_better=True, worse=True, chains=2):
    """A scores file: per setting `chains` chains; the score gets worse with the step when `worse`."""
    rows = []
    for setting in settings:
        for r in range(chains):
            for step in STEPS:
                change = step if worse else -step
                score = 10.0 + (change if lower_better else -change)
                rows.append({"chain_id": f"src__{setting}__r{r}", "source_id": "src", "setting": setting, "repeat": r,
                             "step": step, "editor": editor, "model": model, "metric": metric, "score": score,
                             "lower_better": lower_better, "error": None})
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_groups_and_counts(tmp_path):
    a = _scores(tmp_path / "a.parquet", "gemini", "nano-banana-pro", ["replicate", "mirror"])
    b = _scores(tmp_path / "b.parquet", "flux", "flux2-dev", ["replicate"], worse=False)
    df = merge_scores([a, b])
    # the same chain id from two editors is two chains
    assert df["chain_id"].nunique() == 6
    board = leaderboard(df, ["setting", "editor"])
    got = {(r.setting, r.editor): (r.chains, r.failed, r.failure_rate) for r in board.itertuples()}
    assert got == {("mirror", "gemini"): (2, 0, 0.0), ("replicate", "gemini"): (2, 0, 0.0),
                   ("replicate", "flux"): (2, 2, 1.0)}
    assert np.allclose(board.loc[board["editor"] == "gemini", "mean_rho"], -1.0)


def test_metrics_ranked_best_first(tmp_path):
    a = _scores(tmp_path / "a.parquet", "e", "m", ["s"], metric="piqe", worse=False)
    b = _scores(tmp_path / "b.parquet", "e", "m", ["s"], metric="visualquality_r1", lower_better=False)
    board = leaderboard(merge_scores([a, b]), ["editor"])
    assert list(board["metric"]) == ["visualquality_r1", "piqe"]
    assert list(board["label"]) == ["VisualQuality-R1", "PIQE"]


def test_duplicates_and_clashes(tmp_path):
    a = _scores(tmp_path / "a.parquet", "e", "m", ["s"])
    assert len(merge_scores([a, a])) == len(pd.read_parquet(a))  # the same file twice: merged once
    b = _scores(tmp_path / "b.parquet", "e", "m", ["s"], worse=False)
    with pytest.raises(Banana100Error, match="a.parquet and b.parquet"):
        merge_scores([a, b])


def test_unknown_group_column(tmp_path):
    a = _scores(tmp_path / "a.parquet", "e", "m", ["s"])
    with pytest.raises(UsageError, match="no such column.*setting"):
        write_leaderboard([a], tmp_path / "out", by=["temperature"])
    assert not (tmp_path / "out").exists()  # nothing written before the check


def test_a_measurement_column_is_no_group(tmp_path):
    """`components` (a dict per row: edit_damage's parts) or `score` is a measurement: --by names it as not one
    to group by (a dict column reached pandas' groupby and failed there, with a traceback)."""
    a = _scores(tmp_path / "a.parquet", "e", "m", ["s"])
    df = pd.read_parquet(a).assign(components=lambda d: [{"grain": 1.0}] * len(d))
    df.to_parquet(a)
    for column in ("components", "score"):
        with pytest.raises(UsageError, match=f"--by {column}: no such column to group by.*setting"):
            write_leaderboard([a], tmp_path / "out", by=[column])


def test_files_written(tmp_path):
    a = _scores(tmp_path / "a.parquet", "gemini", "nano-banana-pro", ["replicate", "mirror"])
    b = _scores(tmp_path / "b.parquet", "flux", "flux2-dev", ["replicate"], worse=False)
    paths = write_leaderboard([a, b], tmp_path / "out", by=["setting", "editor"])
    csv = pd.read_csv(paths["csv"])
    assert list(csv.columns[:3]) == ["metric", "setting", "editor"]
    assert {"chains", "failed", "failure_rate", "mean_rho"} <= set(csv.columns)
    md = paths["md"].read_text()
    assert "| NIQE | replicate | flux | 2 | 2 | 100 % | +1.00 |" in md
    png = np.asarray(Image.open(paths["png"]).convert("RGB"))
    assert png.shape[0] > 150 and png.shape[1] > 300 and png.std() > 10
    assert "a.parquet, b.parquet" in paths["report"].read_text()


def test_cli(tmp_path):
    from banana100.cli import main

    a = _scores(tmp_path / "a.parquet", "gemini", "nano-banana-pro", ["replicate"])
    b = _scores(tmp_path / "b.parquet", "flux", "flux2-dev", ["replicate"])
    assert main(["report", str(a), str(b), "--by", "editor", "--out", str(tmp_path / "lb")]) in (0, None)
    assert (tmp_path / "lb" / "leaderboard.png").is_file() and (tmp_path / "lb" / "report.md").is_file()


def test_space_explorer_leaderboard(tmp_path):
    """What the Space's Leaderboard tab shows: the table and heatmap of the scores it holds."""
    from banana100 import explore as ex
    from banana100.scoring import score_to_parquet
    from banana100.testing.runfolder import make_run_folder

    run = tmp_path / "run"
    make_run_folder(run, sources=("a", "b"), steps=20, size=(96, 96))
    scores = score_to_parquet(run, ["piqe"], tmp_path / "s.parquet", device="cpu", progress=False)
    explorer = ex.Explorer.open(run, scores, cache_dir=tmp_path / "cache")
    table = explorer.leaderboard()
    assert list(table.columns) == ["metric", "setting", "editor", "chains", "failed", "failure rate", "mean rho"]
    assert table.iloc[0]["metric"] == "PIQE" and table.iloc[0]["chains"] == 2
    assert len(table) == 1 and "source" not in set(table["editor"])  # step 0 belongs to its chain's editor
    png = explorer.leaderboard_png(tmp_path / "board.tmp")  # any name: written as PNG
    assert Image.open(png).format == "PNG"


@pytest.mark.integration  # fresh interpreters (~6 s)
def test_report_and_leaderboard_import_alone_without_a_circle():
    """report.py never imports leaderboard.py (the grouped protocol lives in report.py); each
    imports alone in a fresh interpreter."""
    import ast
    import subprocess
    import sys

    import banana100.report as report

    tree = ast.parse(open(report.__file__).read())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "banana100.leaderboard" not in imported
    for first in ("banana100.leaderboard", "banana100.report"):
        code = f"import {first}; from banana100.leaderboard import leaderboard, write_leaderboard; " \
               "from banana100.report import write_report, leaderboard as lb; assert lb is leaderboard"
        subprocess.run([sys.executable, "-c", code], check=True)


def test_by_a_column_twice_counts_once(tmp_path):
    from banana100.cli import main

    a = _scores(tmp_path / "a.parquet", "gemini", "nano-banana-pro", ["replicate", "mirror"])
    assert main(["report", str(a), "--by", "setting,setting", "--out", str(tmp_path / "lb")]) == 0
    csv = pd.read_csv(tmp_path / "lb" / "leaderboard.csv")
    assert list(csv.columns[:2]) == ["metric", "setting"] and len(csv) == 2


def test_markdown_names_the_steps_used_and_escapes_names(tmp_path):
    a = _scores(tmp_path / "a.parquet", "ed|itor", "m", ["re|pli\ncate"])
    paths = write_leaderboard([a], tmp_path / "out", by=["setting", "editor"], reference_step=1, check_steps=(5, 10))
    md = paths["md"].read_text()
    assert "every check step (5, 10) is strictly worse than at step 1" in md
    rows = [line for line in md.splitlines() if line.startswith("| NIQE")]
    assert rows == ["| NIQE | re\\|pli cate | ed\\|itor | 2 | 0 | 0 % | -1.00 |"]
    # every table line has as many unescaped cells as the header
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert len({len(line.replace("\\|", "").split("|")) for line in table}) == 1


def test_heatmap_of_3000_groups_stays_small_and_fast(tmp_path):
    import time

    from banana100.leaderboard import MAX_HEATMAP_GROUPS, MAX_HEATMAP_SIDE_PX, heatmap

    n = 3000
    board = pd.DataFrame({"metric": "niqe", "label": "NIQE", "setting": [f"setting number {i:04d} " + "x" * 60
                                                                          for i in range(n)],
                          "chains": [1 + (i % 7) for i in range(n)], "passed": 0, "failed": 1, "incomplete": 0,
                          "failure_rate": 1.0, "mean_rho": 0.5, "lower_better": True})
    t0 = time.perf_counter()
    png = heatmap(board, ["setting"], tmp_path / "board.png")
    assert time.perf_counter() - t0 < 20
    with Image.open(png) as im:
        assert max(im.size) <= MAX_HEATMAP_SIDE_PX
    assert MAX_HEATMAP_GROUPS < n


def test_a_column_that_differs_within_a_chain_is_no_group(tmp_path):
    """Issue 44 item 13: --by step or --by sha256 made every group "incomplete" without a word."""
    a = _scores(tmp_path / "a.parquet", "e", "m", ["s"])
    df = pd.read_parquet(a).assign(sha256=lambda d: [f"{i:064x}" for i in range(len(d))])
    df.to_parquet(a)
    for column in ("step", "sha256"):
        with pytest.raises(UsageError, match=f"--by {column}: not a column to group by: a group must hold whole "
                                             "chains.*group by chat_mode, editor, model, repeat"):
            write_leaderboard([a], tmp_path / "out", by=["setting", column])
    assert not (tmp_path / "out").exists()


def test_markdown_shows_html_and_markdown_in_names_as_text(tmp_path):
    """Issue 44 item 14: `<script>`, `[link](...)` and `**bold**` in a group name went into leaderboard.md as
    they were (rendered), and a name of spaces became an empty cell."""
    from banana100.report import md_cell

    assert md_cell("<script>alert(1)</script>") == "&lt;script&gt;alert\\(1\\)&lt;/script&gt;"
    assert md_cell("[link](http://x)") == "\\[link\\]\\(http://x\\)"
    assert md_cell("**bold** _it_ `code` a|b") == "\\*\\*bold\\*\\* \\_it\\_ \\`code\\` a\\|b"
    assert md_cell("   ") == "(blank)" and md_cell("") == "(empty)"
    assert md_cell("different_chat") == "different_chat" and md_cell("nano-banana-pro") == "nano-banana-pro"
    a = _scores(tmp_path / "a.parquet", "<b>ed</b>", "m", ["**bold**", "   "])
    md = write_leaderboard([a], tmp_path / "out", by=["setting", "editor"])["md"].read_text()
    assert "<b>" not in md and "**bold**" not in md
    assert "| NIQE | \\*\\*bold\\*\\* | &lt;b&gt;ed&lt;/b&gt; |" in md and "| NIQE | (blank) | &lt;b&gt;ed" in md
