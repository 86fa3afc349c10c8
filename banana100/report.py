"""`banana100 report`: the sensitivity protocol over every metric of a scores file.

Writes `report.md` (failure table, per-metric reading, per-chain verdicts), `sensitivity.png`
(oriented score change vs step, one panel per metric; down = worse) and `summary.json`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from banana100 import about
from banana100.errors import Banana100Error
from banana100.metrics.protocol import DEFAULT_CHECK_STEPS, DEFAULT_REFERENCE_STEP, sensitivity
from banana100.metrics.table import METRICS


def load_scores(path: str | os.PathLike) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise Banana100Error(f"{path}: no such scores file (make one with `banana100 score`)")
    try:
        df = pq.read_table(path).to_pandas()
    except Exception as e:  # pyarrow raises several types for a non-Parquet file
        raise Banana100Error(f"{path}: not a readable Parquet scores file ({e})") from None
    needed = {"chain_id", "step", "metric", "score", "lower_better"}
    if not needed <= set(df.columns):
        raise Banana100Error(f"{path}: missing columns {sorted(needed - set(df.columns))}")
    return df


def analyse(df: pd.DataFrame, reference_step=DEFAULT_REFERENCE_STEP, check_steps=DEFAULT_CHECK_STEPS) -> dict:
    """{metric: protocol output} for every metric in a scores table, in metric-table order."""
    order = [m for m in METRICS if m in set(df["metric"])] + sorted(set(df["metric"]) - set(METRICS))
    results = {}
    for metric in order:
        rows = df[df["metric"] == metric]
        results[metric] = sensitivity(
            rows["score"].tolist(), rows["step"].tolist(), rows["chain_id"].tolist(),
            lower_better=bool(rows["lower_better"].iloc[0]), reference_step=reference_step, check_steps=check_steps,
        )
    return results


def _fmt(x, pct=False):
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "n/a"
    return f"{100 * x:.0f} %" if pct else f"{x:+.2f}"


def _reading(metric: str, r: dict) -> str:
    """One sentence on how a metric reacted, computed from its protocol output."""
    name = METRICS[metric].display_name if metric in METRICS else metric
    complete = r["n_chains"] - r["n_incomplete"]
    if not complete:
        return f"**{name}**: no complete chain to judge."
    rho = r["mean_rho"]
    trend = ("follows the damage over the whole chain" if rho is not None and rho <= -0.5 else
             "moves against the damage (scores the copies as better)" if rho is not None and rho >= 0.5 else
             "shows no consistent trend with the damage")
    return (f"**{name}** saw the damage at steps {', '.join(map(str, r['check_steps']))} in {r['n_passed']} of "
            f"{complete} chains (failure rate {_fmt(r['failure_rate'], pct=True)}); its oriented score {trend} "
            f"(mean Spearman rho {_fmt(rho)}), and the last step scores worse than step {r['reference_step']} in "
            f"{_fmt(r['share_last_worse'], pct=True)} of chains.")


MAX_LISTED = 50  # missing scores listed one by one per metric in report.md (all are in summary.json)


def _missing_scores(df: pd.DataFrame, results: dict) -> list[str]:
    """The report's section on scores that are missing (NaN), each named with its error text."""
    total = sum(r["n_undefined_scores"] for r in results.values())
    if not total:
        return []
    lines = ["", "## Missing scores", "",
             f"{total} (image, metric) pairs have no score (NaN in the scores file). They are never used as "
             "numbers: a chain missing its reference step or a check step is incomplete (neither passed nor "
             "failed, left out of the failure rate); elsewhere the step is left out of rho. Each is listed with "
             "the `error` text `banana100 score` wrote for it.", ""]
    has_error = "error" in df
    for metric, r in results.items():
        if not r["n_undefined_scores"]:
            continue
        rows = df[(df["metric"] == metric) & ~np.isfinite(df["score"].astype(float))]
        reasons = {(c, int(s)): e for c, s, e in zip(rows["chain_id"], rows["step"],
                                                    rows["error"] if has_error else [None] * len(rows))}
        incomplete = [c for c in r["per_chain"] if c["passed"] is None]
        lines += [f"**{metric}**: {r['n_undefined_scores']} missing; incomplete chains: "
                  + (", ".join(f"{c['chain_id']} ({c['incomplete_reason']})" for c in incomplete) or "none"), "",
                  "| chain | step | why |", "| --- | ---: | --- |"]
        for u in r["undefined_scores"][:MAX_LISTED]:
            why = reasons.get((u["chain_id"], int(u["step"]))) or "NaN score, no error recorded"
            lines.append(f"| {u['chain_id']} | {u['step']} | {str(why).replace('|', '/')} |")
        if r["n_undefined_scores"] > MAX_LISTED:
            lines.append(f"| ... | | {r['n_undefined_scores'] - MAX_LISTED} more in summary.json |")
        lines.append("")
    return lines


def plot(df: pd.DataFrame, results: dict, path: Path, reference_step=DEFAULT_REFERENCE_STEP) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = list(results)
    ncols = min(3, len(metrics))
    nrows = -(-len(metrics) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.4 * nrows), squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        rows = df[df["metric"] == metric]
        sign = -1.0 if bool(rows["lower_better"].iloc[0]) else 1.0
        for cid, g in rows.groupby("chain_id"):
            g = g.sort_values("step")
            ref = g.loc[g["step"] == reference_step, "score"]
            if ref.empty or np.isnan(ref.iloc[0]):
                continue
            ax.plot(g["step"], sign * (g["score"] - ref.iloc[0]), lw=1, alpha=0.75, label=cid)
        for k in results[metric]["check_steps"]:
            ax.axvline(k, color="0.6", ls=":", lw=0.8)
        ax.axhline(0, color="k", lw=0.8)
        name = METRICS[metric].display_name if metric in METRICS else metric
        fr = results[metric]["failure_rate"]
        ax.set_title(f"{name} ({'lower' if sign < 0 else 'higher'} is better) - fails {_fmt(fr, pct=True)}", fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylabel(f"oriented change vs step {reference_step}\n(down = worse)", fontsize=8)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    n_chains = df["chain_id"].nunique()
    if n_chains <= 8:
        axes.flat[0].legend(fontsize=6, loc="best")
    # one line when the panels are wide enough for it, two otherwise (one panel: PIQE alone)
    sep = " " if ncols >= 2 else "\n"
    fig.suptitle(f"Banana100 sensitivity: a metric that sees the damage goes down;{sep}dotted lines = check steps",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(scores: str | os.PathLike, out_dir: str | os.PathLike, montage: Path | None = None,
                 reference_step: int = DEFAULT_REFERENCE_STEP, check_steps=DEFAULT_CHECK_STEPS) -> Path:
    """Write report.md, sensitivity.png and summary.json into out_dir; return the report path.

    `montage`, when given, is an image (e.g. a chain's steps side by side) shown at the top.
    `reference_step` and `check_steps` are the protocol's (ten-step releases: e.g. 1 and 2, 5, 10).
    """
    df = load_scores(scores)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    check_steps = tuple(int(k) for k in check_steps)
    results = analyse(df, reference_step=reference_step, check_steps=check_steps)
    plot_path = plot(df, results, out_dir / "sensitivity.png", reference_step=reference_step)
    (out_dir / "summary.json").write_text(json.dumps(results, indent=1))

    editors = sorted(set(zip(df.get("editor", pd.Series(dtype=str)).fillna("?"), df.get("model", pd.Series(dtype=str)).fillna("?"))))
    lines = [
        "# Banana100 sensitivity report",
        "",
        f"Scores: `{Path(scores).name}`: {df['chain_id'].nunique()} chains, "
        f"{df[['chain_id', 'step']].drop_duplicates().shape[0]} images, {len(results)} metrics "
        f"({', '.join(results)}); steps {int(df['step'].min())}-{int(df['step'].max())}; "
        f"settings: {', '.join(sorted(df['setting'].dropna().unique())) if 'setting' in df else 'n/a'}; "
        f"editors: {', '.join(f'{e} ({m})' for e, m in editors)}.",
        "",
    ]
    if any(e == "simulated" for e, _ in editors):
        lines += [f"> {about.SIMULATED_EDITOR_NOTE} In the paper's real chains, BRISQUE *improved* "
                  "(34.1 -> -9.8) while the noise grew.", ""]
    if montage is not None:
        lines += [f"![chain]({os.path.relpath(montage, out_dir)})", ""]
    lines += [
        f"Protocol ({about.PAPER_ID}): orient scores so that lower = worse; a chain passes when the score at "
        f"every check step ({', '.join(map(str, check_steps))}) is strictly worse than at step "
        f"{reference_step}. A tie is a failure; chains missing a needed step, or with no score there (NaN: "
        "see Missing scores), are incomplete and left out of the rate.",
        "",
        "| metric | direction | chains | passed | failed | incomplete | failure rate | mean rho | last step worse |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for metric, r in results.items():
        direction = "lower better" if r["lower_better"] else "higher better"
        lines.append(
            f"| {metric} | {direction} | {r['n_chains']} | {r['n_passed']} | {r['n_failed']} | {r['n_incomplete']} "
            f"| {_fmt(r['failure_rate'], pct=True)} | {_fmt(r['mean_rho'])} | {_fmt(r['share_last_worse'], pct=True)} |"
        )
    lines += ["", f"![oriented score vs step]({plot_path.name})", "", "## How each metric reacted", ""]
    lines += [f"- {_reading(m, r)}" for m, r in results.items()]
    lines += _missing_scores(df, results)
    lines += ["", "## Per chain", ""]
    for metric, r in results.items():
        dk = [f"d_{k}" for k in r["check_steps"]]
        lines += [f"### {metric}", "", "| chain | verdict | " + " | ".join(dk) + " | rho |",
                  "| --- | --- | " + " | ".join("---:" for _ in dk) + " | ---: |"]
        for c in r["per_chain"]:
            verdict = {True: "pass", False: "FAIL", None: "incomplete"}[c["passed"]]
            if c["passed"] is None and c.get("incomplete_reason"):
                verdict += f" ({c['incomplete_reason']})"
            lines.append(f"| {c['chain_id']} | {verdict} | " + " | ".join(_fmt(c[k]) for k in dk) + f" | {_fmt(c['rho'])} |")
        lines.append("")
    path = out_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
