"""`banana100 report SCORES... --by setting,editor`: the protocol per metric and group, as a leaderboard.

Several scores files merge (one per editor, or per run); a chain is its `chain_id` within one
editor and model, so the same source, setting and repeat made by two editors are two chains.
For every metric and every combination of the `--by` columns the paper's protocol
(`banana100.metrics.protocol.sensitivity`) gives chains, failed, failure rate and mean rho:

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
from banana100.metrics.protocol import DEFAULT_CHECK_STEPS, DEFAULT_REFERENCE_STEP, sensitivity

COLUMNS = ("chains", "passed", "failed", "incomplete", "failure_rate", "mean_rho")


def merge_scores(paths: list[str | os.PathLike]) -> pd.DataFrame:
    """The scores files as one table, with `scores_file` (the file each row came from).

    A chain id made by two editors or models is qualified as `<chain_id> [<editor>:<model>]`;
    exact duplicates (a file given twice, or a run merged again) are dropped; the same chain,
    step and metric with two different scores is an error naming both files.
    """
    from banana100.report import load_scores

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
    clash = df[df.duplicated(subset=key, keep=False)]
    if len(clash):
        first = clash.iloc[0]
        files = sorted(set(clash.loc[(clash[key] == first[key]).all(axis=1), "scores_file"]))
        raise Banana100Error(f"{' and '.join(files)}: both score chain {first['chain_id']!r} step {first['step']} "
                             f"with {first['metric']} differently (same editor and model); give only one of them")
    return df


def leaderboard(df: pd.DataFrame, by: list[str], reference_step=DEFAULT_REFERENCE_STEP,
                check_steps=DEFAULT_CHECK_STEPS) -> pd.DataFrame:
    """One row per metric and group of `by` (any column of the scores: setting, editor, model, ...)."""
    from banana100.metrics.resolve import label

    missing = [c for c in by if c not in df.columns]
    if missing:
        usable = sorted(c for c in df.columns if c not in ("score", "lower_better", "error", "flat_share", "metric"))
        raise UsageError(f"--by {','.join(missing)}: no such column in the scores; the scores carry {', '.join(usable)}")
    rows = []
    df = _sources_join_their_chains(df, by)
    df = df.assign(**{c: df[c].fillna("-") for c in by if df[c].dtype == object})  # not recorded: one group, "-"
    groups = df.groupby(["metric"] + list(by), dropna=False, sort=True)
    for keys, g in groups:
        keys = keys if isinstance(keys, tuple) else (keys,)
        r = sensitivity(g["score"].tolist(), g["step"].tolist(), g["chain_id"].tolist(),
                        lower_better=bool(g["lower_better"].iloc[0]), reference_step=reference_step,
                        check_steps=check_steps)
        rows.append({"metric": keys[0], "label": label(keys[0]), **{c: v for c, v in zip(by, keys[1:])},
                     "chains": r["n_chains"], "passed": r["n_passed"], "failed": r["n_failed"],
                     "incomplete": r["n_incomplete"], "failure_rate": r["failure_rate"], "mean_rho": r["mean_rho"],
                     "lower_better": bool(g["lower_better"].iloc[0])})
    board = pd.DataFrame(rows, columns=["metric", "label", *by, *COLUMNS, "lower_better"])
    # best first: the metric's failure rate over all its chains (the share of chains it missed)
    overall = board.groupby("metric").apply(
        lambda g: g["failed"].sum() / max(1, (g["chains"] - g["incomplete"]).sum()), include_groups=False)
    board["_rank"] = board["metric"].map(overall)
    return board.sort_values(["_rank", "metric", *by], kind="stable").drop(columns="_rank").reset_index(drop=True)


def _sources_join_their_chains(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Step 0 is the source image (editor "source", model "source"): grouped by editor or model,
    it belongs to the chain's own editor and model, not to a group of its own with no edited step."""
    cols = [c for c in ("editor", "model") if c in by and "editor" in df]
    if not cols:
        return df
    df = df.copy()
    src = df["editor"] == "source"
    for c in cols:
        made = df[~src].groupby("chain_id")[c].first()
        df.loc[src, c] = df.loc[src, "chain_id"].map(made).fillna(df.loc[src, c])
    return df


def _group_name(row, by: list[str]) -> str:
    return " / ".join(str(row[c]) for c in by) if by else "all"


def _fmt(x, pct=False) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "n/a"
    return f"{100 * x:.0f} %" if pct else f"{x:+.2f}"


def to_markdown(board: pd.DataFrame, by: list[str], files: list[str]) -> str:
    lines = ["# Banana100 leaderboard", "",
             f"Scores: {', '.join(f'`{f}`' for f in files)}. Grouped by: {', '.join(by) or 'nothing (all chains)'}. "
             f"A metric passes a chain when the score at every check step ({', '.join(map(str, DEFAULT_CHECK_STEPS))}) "
             f"is strictly worse than at step {DEFAULT_REFERENCE_STEP}; failure rate = failed / (chains - incomplete). "
             "Metrics are ranked by their failure rate over all groups (lowest first).", "",
             "| metric | " + " | ".join(by) + (" | " if by else "") + "chains | failed | failure rate | mean rho |",
             "| --- | " + " | ".join("---" for _ in by) + (" | " if by else "") + "---: | ---: | ---: | ---: |"]
    for _, r in board.iterrows():
        cells = [str(r[c]) for c in by]
        lines.append(f"| {r['label']} | " + " | ".join(cells) + (" | " if by else "")
                     + f"{r['chains']} | {r['failed']} | {_fmt(r['failure_rate'], pct=True)} | {_fmt(r['mean_rho'])} |")
    return "\n".join(lines) + "\n"


def heatmap(board: pd.DataFrame, by: list[str], path: Path) -> Path:
    """Failure rate, metrics (rows, best first) x groups (columns); each cell says failed/complete."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    board = board.assign(group=[_group_name(r, by) for _, r in board.iterrows()])
    metrics = list(dict.fromkeys(board["metric"]))
    groups = list(dict.fromkeys(sorted(board["group"])))
    rate = np.full((len(metrics), len(groups)), np.nan)
    text = [["" for _ in groups] for _ in metrics]
    for _, r in board.iterrows():
        i, j = metrics.index(r["metric"]), groups.index(r["group"])
        complete = r["chains"] - r["incomplete"]
        rate[i, j] = r["failure_rate"] if r["failure_rate"] is not None else np.nan
        text[i][j] = f"{r['failed']}/{complete}" if complete else "n/a"
    labels = [board.loc[board["metric"] == m, "label"].iloc[0] for m in metrics]
    rotate = len(groups) > 3
    longest = max((len(g) for g in groups), default=0)  # room under the axis for the slanted group names
    fig, ax = plt.subplots(figsize=(max(6.5, 1.1 * len(groups) + 2.5),
                                    max(2.2, 0.42 * len(metrics) + 1.4) + (0.045 * longest if rotate else 0)))
    cmap = matplotlib.colormaps["RdYlGn_r"].copy()
    cmap.set_bad("0.85")
    im = ax.imshow(np.ma.masked_invalid(rate), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i in range(len(metrics)):
        for j in range(len(groups)):
            dark = not np.isnan(rate[i, j]) and (rate[i, j] > 0.8 or rate[i, j] < 0.2)
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(range(len(groups)), groups, rotation=30 if rotate else 0, ha="right" if rotate else "center", fontsize=8)
    ax.set_yticks(range(len(metrics)), labels, fontsize=8)
    ax.set_xlabel(" / ".join(by) if by else "")
    fig.colorbar(im, ax=ax, label="failure rate", fraction=0.05)
    ax.set_title("Banana100: share of chains whose damage the metric missed", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")
    plt.close(fig)
    return path


def write_leaderboard(scores: list[str | os.PathLike], out_dir: str | os.PathLike, by: list[str] | None = None,
                      reference_step: int = DEFAULT_REFERENCE_STEP, check_steps=DEFAULT_CHECK_STEPS) -> dict:
    """Merge `scores`, write the report and the leaderboard (csv, md, png) into `out_dir`; their paths.
    `reference_step` and `check_steps` are the protocol's (ten-step releases: 1 and 2, 5, 10)."""
    from banana100.report import write_report

    by = list(by or [])
    df = merge_scores(list(scores))
    check_steps = tuple(int(k) for k in check_steps)
    board = leaderboard(df, by, reference_step, check_steps)  # checks --by before anything is written
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [Path(p).name for p in scores]
    report = write_report(df, out_dir, name=", ".join(files), reference_step=reference_step, check_steps=check_steps)
    csv = out_dir / "leaderboard.csv"
    board.drop(columns="label").to_csv(csv, index=False)
    md = out_dir / "leaderboard.md"
    md.write_text(to_markdown(board, by, files))
    png = heatmap(board, by, out_dir / "leaderboard.png")
    return {"report": report, "csv": csv, "md": md, "png": png}
