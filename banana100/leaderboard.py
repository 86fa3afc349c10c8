"""`banana100 report SCORES... --by setting,editor`: the protocol per metric and group, as a leaderboard.

Several scores files merge (one per editor, or per run); a chain is its `chain_id` within one
editor and model, so the same source, setting and repeat made by two editors are two chains.
For every metric and every combination of the `--by` columns the paper's protocol
(`banana100.protocol.sensitivity`) gives chains, failed, failure rate and mean rho:

    leaderboard.csv   one row per (metric, group)
    leaderboard.md    the same as a table, metrics ranked by failure rate (best first)
    leaderboard.png   heatmap of the failure rate, metrics x groups
    report.md ...     the usual report (banana100.report) on the merged scores
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from banana100.errors import Banana100Error, UsageError
from banana100.protocol import DEFAULT_CHECK_STEPS, DEFAULT_REFERENCE_STEP
# the grouped protocol lives in report.py (its chat-mode table uses it too): this module only
# imports report, never the other way round
from banana100.report import (COLUMNS, check_one_method, check_out_dir, format_number, leaderboard, load_scores,
                              md_cell, write_report)

__all__ = ["COLUMNS", "heatmap", "leaderboard", "merge_scores", "to_markdown", "write_leaderboard"]

# The picture shows at most this many groups (those with the most chains) and metrics (the best
# ranked): 3,000 groups once drew a 396,300 px wide PNG. Every group stays in the csv and md.
MAX_HEATMAP_GROUPS = 30
MAX_HEATMAP_METRICS = 40
MAX_HEATMAP_SIDE_PX = 4000  # and neither side longer than this, whatever the names
MAX_TICK_CHARS = 40  # a group name longer than this is cut on the picture (whole in csv and md)


def merge_scores(paths: list[str | os.PathLike]) -> pd.DataFrame:
    """The scores files as one table, with `scores_file` (the file each row came from).

    A chain id made by two editors or models is qualified as `<chain_id> [<editor>:<model>]`;
    exact duplicates (a file given twice, or a run merged again) are dropped; the same chain,
    step and metric with two different scores is an error naming both files.
    """
    if not paths:
        raise UsageError("no scores file given")
    frames = []
    for p in paths:
        df = load_scores(p)
        df["scores_file"] = Path(p).name
        for col in ("editor", "model"):
            if col not in df:
                df[col] = None
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    who = df["editor"].fillna("?").astype(str) + ":" + df["model"].fillna("?").astype(str)
    makers = who.groupby(df["chain_id"]).transform("nunique")
    df.loc[makers > 1, "chain_id"] = df["chain_id"] + " [" + who + "]"
    key = ["chain_id", "step", "metric"]
    df = df.drop_duplicates(subset=key + ["score"]).reset_index(drop=True)
    check_one_method(df, " and ".join(dict.fromkeys(df["scores_file"])))
    clash = df[df.duplicated(subset=key, keep=False)]
    if len(clash):
        first = clash.iloc[0]
        files = sorted(set(clash.loc[(clash[key] == first[key]).all(axis=1), "scores_file"]))
        raise Banana100Error(f"{' and '.join(files)}: both score chain {first['chain_id']!r} step {first['step']} "
                             f"with {first['metric']} differently (same editor and model); give only one of them")
    return df


def _group_name(row, by: list[str]) -> str:
    return " / ".join(str(row[c]) for c in by) if by else "all"


def _tick(name: str) -> str:
    name = " ".join(name.split())
    return name if len(name) <= MAX_TICK_CHARS else name[:MAX_TICK_CHARS - 3] + "..."


def to_markdown(board: pd.DataFrame, by: list[str], files: list[str], reference_step: int = DEFAULT_REFERENCE_STEP,
                check_steps=DEFAULT_CHECK_STEPS) -> str:
    """The leaderboard as a Markdown table; `reference_step` and `check_steps` are the ones used."""
    by = list(dict.fromkeys(by))
    lines = ["# Banana100 leaderboard", "",
             f"Scores: {', '.join(md_cell(f) for f in files)}. "
             f"Grouped by: {', '.join(by) or 'nothing (all chains)'}. "
             f"A metric passes a chain when the score at every check step ({', '.join(map(str, check_steps))}) "
             f"is strictly worse than at step {reference_step}; failure rate = failed / (chains - incomplete). "
             "Metrics are ranked by their failure rate over all groups (lowest first).", "",
             "| metric | " + " | ".join(by) + (" | " if by else "") + "chains | failed | failure rate | mean rho |",
             "| --- | " + " | ".join("---" for _ in by) + (" | " if by else "") + "---: | ---: | ---: | ---: |"]
    for r in board.to_dict("records"):
        cells = [md_cell(r[c]) for c in by]
        lines.append(f"| {md_cell(r['label'])} | " + " | ".join(cells) + (" | " if by else "")
                     + f"{r['chains']} | {r['failed']} | {format_number(r['failure_rate'], pct=True)} | {format_number(r['mean_rho'])} |")
    return "\n".join(lines) + "\n"


def heatmap(board: pd.DataFrame, by: list[str], path: Path) -> Path:
    """Failure rate, metrics (rows, best first) x groups (columns); each cell says failed/complete.

    At most MAX_HEATMAP_GROUPS groups (those with the most chains) and MAX_HEATMAP_METRICS
    metrics (the best ranked); a note under the title says how many were left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = list(dict.fromkeys(by))
    board = board.assign(group=[_group_name(r, by) for r in board.to_dict("records")])
    all_metrics = list(dict.fromkeys(board["metric"]))
    size = board.groupby("group")["chains"].max()
    all_groups = sorted(size.index, key=lambda g: (-size[g], g))
    metrics = all_metrics[:MAX_HEATMAP_METRICS]
    groups = sorted(all_groups[:MAX_HEATMAP_GROUPS])
    row, col = {m: i for i, m in enumerate(metrics)}, {g: j for j, g in enumerate(groups)}
    rate = np.full((len(metrics), len(groups)), np.nan)
    text = [["" for _ in groups] for _ in metrics]
    for r in board[board["metric"].isin(row) & board["group"].isin(col)].to_dict("records"):
        i, j = row[r["metric"]], col[r["group"]]
        complete = r["chains"] - r["incomplete"]
        rate[i, j] = r["failure_rate"] if r["failure_rate"] is not None else np.nan
        text[i][j] = f"{r['failed']}/{complete}" if complete else "n/a"
    first_label = board.drop_duplicates("metric").set_index("metric")["label"]
    labels = [_tick(str(first_label[m])) for m in metrics]
    ticks = [_tick(g) for g in groups]
    rotate = len(groups) > 3
    longest = max((len(g) for g in ticks), default=0)  # room under the axis for the slanted group names
    dpi = 120
    most = MAX_HEATMAP_SIDE_PX / dpi
    fig, ax = plt.subplots(figsize=(min(most, max(6.5, 1.1 * len(groups) + 2.5)),
                                    min(most, max(2.2, 0.42 * len(metrics) + 1.4) + (0.045 * longest if rotate else 0))))
    cmap = matplotlib.colormaps["RdYlGn_r"].copy()
    cmap.set_bad("0.85")
    im = ax.imshow(np.ma.masked_invalid(rate), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i in range(len(metrics)):
        for j in range(len(groups)):
            dark = not np.isnan(rate[i, j]) and (rate[i, j] > 0.8 or rate[i, j] < 0.2)
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(range(len(groups)), ticks, rotation=30 if rotate else 0, ha="right" if rotate else "center", fontsize=8)
    ax.set_yticks(range(len(metrics)), labels, fontsize=8)
    ax.set_xlabel(" / ".join(by) if by else "")
    fig.colorbar(im, ax=ax, label="failure rate", fraction=0.05)
    title = "Banana100: share of chains whose damage the metric missed"
    left_out = [f"{n} {what} left out" for n, what in ((len(all_groups) - len(groups), "groups (the smallest)"),
                                                        (len(all_metrics) - len(metrics), "metrics (the worst ranked)"))
                if n]
    if left_out:
        title += f"\n{'; '.join(left_out)}: all are in leaderboard.csv and leaderboard.md"
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi, format="png")
    plt.close(fig)
    return path


def write_leaderboard(scores: list[str | os.PathLike], out_dir: str | os.PathLike, by: list[str] | None = None,
                      reference_step: int = DEFAULT_REFERENCE_STEP, check_steps=DEFAULT_CHECK_STEPS) -> dict:
    """Merge `scores`, write the report and the leaderboard (csv, md, png) into `out_dir`; their paths.
    `reference_step` and `check_steps` are the protocol's (ten-step releases: 1 and 2, 5, 10).
    A `by` column named twice counts once."""
    by = list(dict.fromkeys(by or []))
    df = merge_scores(list(scores))
    check_steps = tuple(int(k) for k in check_steps)
    board = leaderboard(df, by, reference_step, check_steps)  # checks --by before anything is written
    check_out_dir(out_dir)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [Path(p).name for p in scores]
    report = write_report(df, out_dir, name=", ".join(files), reference_step=reference_step, check_steps=check_steps)
    csv = out_dir / "leaderboard.csv"
    board.drop(columns="label").to_csv(csv, index=False)
    md = out_dir / "leaderboard.md"
    md.write_text(to_markdown(board, by, files, reference_step, check_steps))
    png = heatmap(board, by, out_dir / "leaderboard.png")
    return {"report": report, "csv": csv, "md": md, "png": png}
