"""`banana100 report`: the sensitivity protocol over every metric of a scores file.

Writes `report.md` (failure table, per-metric reading, per-chain verdicts), `sensitivity.png`
(oriented score change vs step, one panel per metric; down = worse) and `summary.json`.
"""

from __future__ import annotations

import html
import json
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from banana100 import about
from banana100.errors import Banana100Error, DatasetError, UsageError
from banana100.metrics.detector.relative import BARE as DETECTOR, NAME as RELATIVE
from banana100.protocol import DEFAULT_CHECK_STEPS, DEFAULT_REFERENCE_STEP, check_steps_for, sensitivity
from banana100.metrics.resolve import label
from banana100.metrics.table import METRICS
from banana100.schema import DEFAULT_CHAT_MODE


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
    if df.empty:
        raise Banana100Error(f"{path}: no scores in it (0 rows); score a run or dataset folder that has images")
    df = df[df["chain_id"].notna()].copy()  # plain images (scored from a folder) belong to no chain
    if df.empty:
        raise DatasetError(f"{path} holds no chain steps (plain images have no chain_id): the protocol compares "
                           "the steps of a chain; score a run or dataset folder for a report")
    numeric = pd.to_numeric(df["score"], errors="coerce")
    bad = df["score"][numeric.isna() & df["score"].notna()]
    if len(bad) or df["score"].dtype == bool:
        example = f" (e.g. {bad.iloc[0]!r})" if len(bad) else ""
        raise Banana100Error(f"{path}: the `score` column is not numeric{example}")
    df["score"] = numeric.astype(float)
    df["step"] = _steps_of(df["step"], path)
    # files from before these columns, and null chat modes, are the paper's different chat (schema.py)
    df["chat_mode"] = df["chat_mode"].fillna(DEFAULT_CHAT_MODE) if "chat_mode" in df else DEFAULT_CHAT_MODE
    if "variant" not in df:
        df["variant"] = None
    keys = df[["chain_id", "step", "metric"]]
    doubled = keys[keys.duplicated()]
    if len(doubled):
        c, s, m = doubled.iloc[0]
        raise Banana100Error(f"{path}: {len(doubled)} rows repeat a (chain, step, metric) already scored, e.g. chain "
                             f"{c!r} step {s} metric {m!r}; score again into a new --out")
    df = with_method(df)
    check_one_method(df, str(path))
    return df


def with_method(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with what made each score (backend, mode, precision, version), filled in for a file from before
    a column as `banana100 score` reads it (banana100/scoring/provenance.py)."""
    from banana100.metrics.table import version_before_the_column

    for column, before in (("backend", "pyiqa"), ("mode", "pyiqa"), ("precision", "exact")):
        df[column] = df[column].fillna(before) if column in df else before
    if "version" not in df:
        comps = df["components"].tolist() if "components" in df else [None] * len(df)
        versions = [version_before_the_column(m, c, s)
                    for m, c, s in zip(df["metric"].tolist(), comps, df["score"].tolist(), strict=True)]
        df["version"] = pd.array(versions, "Int64")
    return df


def check_one_method(df: pd.DataFrame, where: str) -> None:
    """Refuse scores of one metric made two ways (another backend, mode, precision or version: what
    `banana100 score` refuses to resume into one file), on one line naming the files and the counts."""
    from banana100.metrics.table import SCORE_METHOD as METHOD

    files = df["scores_file"] if "scores_file" in df else pd.Series(where, index=df.index)
    for metric, rows in df.groupby("metric", sort=True):
        for column in METHOD:
            values = rows[column].dropna()  # an error row of unknown version scored nothing
            if values.nunique() < 2:
                continue
            said = []
            for value, group in values.groupby(values, sort=True):
                value = value.item() if hasattr(value, "item") else value  # 1, not np.int64(1)
                names = sorted(set(files[group.index]))
                said.append(f"{column} {value!r}: {len(group)} rows" + (f" in {', '.join(names)}"
                                                                          if files.nunique() > 1 else ""))
            raise DatasetError(
                f"{where}: the {metric} scores were made two ways ({'; '.join(said)}); they would not compare. "
                "Report them apart, or score them again one way into a new --out")


def _steps_of(column: pd.Series, path) -> pd.Series:
    """The `step` column as integers: numbers stored as text ("5") are read as numbers; anything
    else is an error naming the file (compared as text, no step would match the protocol's)."""
    numeric = pd.to_numeric(column, errors="coerce") if column.dtype != bool else pd.Series(np.nan, column.index)
    bad = column[numeric.isna() | (numeric % 1 != 0)]
    if len(bad):
        raise Banana100Error(f"{path}: the `step` column holds {bad.tolist()[0]!r} ({len(bad)} such rows); each step must "
                             "be a whole number (0 = the source image)")
    return numeric.astype(int)


def analyse(df: pd.DataFrame, reference_step=DEFAULT_REFERENCE_STEP, check_steps=DEFAULT_CHECK_STEPS) -> dict:
    """{metric: protocol output} for every metric in a scores table, in metric-table order."""
    order = [m for m in METRICS if m in set(df["metric"])] + sorted(set(df["metric"]) - set(METRICS))
    results = {}
    for metric in order:
        rows = df[df["metric"] == metric]
        direction = set(rows["lower_better"].dropna().map(bool))
        if len(direction) != 1:  # the scores file says the direction; never guess it
            raise DatasetError(f"scores of {metric}: the lower_better column holds "
                               f"{'both True and False' if direction else 'no value'}; rescore into a new file")
        results[metric] = sensitivity(
            rows["score"].tolist(), rows["step"].tolist(), rows["chain_id"].tolist(),
            lower_better=direction.pop(), reference_step=reference_step, check_steps=check_steps,
        )
    return results


COLUMNS = ("chains", "passed", "failed", "incomplete", "failure_rate", "mean_rho")


# columns of the scores that are measurements, not labels: no --by groups by them (components holds a dict);
# nor by what differs from step to step of one chain (a group must hold whole chains: grouped by step or by
# image, every group was "incomplete"), nor by what made the score (one value per metric: check_one_method)
NOT_GROUPS = ("score", "lower_better", "error", "flat_share", "components", "metric",
              "step", "sha256", "image", "width", "height", "parent_sha256", "prompt", "seed",
              "backend", "mode", "precision", "version", "reference", "reference_sha256")


def leaderboard(df: pd.DataFrame, by: list[str], reference_step=DEFAULT_REFERENCE_STEP,
                check_steps=DEFAULT_CHECK_STEPS) -> pd.DataFrame:
    """One row per metric and group of `by` (any column of the scores: setting, editor, model, ...):
    the leaderboard (banana100.leaderboard writes it) and the report's chat-mode/variant table.
    A column named twice counts once."""
    by = list(dict.fromkeys(by))
    usable = sorted(c for c in df.columns if c not in NOT_GROUPS)
    per_step = [c for c in by if c in NOT_GROUPS[6:] and c in df.columns]
    if per_step:
        raise UsageError(f"--by {','.join(per_step)}: not a column to group by: a group must hold whole chains (the "
                         f"protocol compares a chain's steps), and {per_step[0]} differs from step to step or says how "
                         f"the scores were made; group by {', '.join(c for c in usable if c != 'chain_id')}")
    missing = [c for c in by if c not in usable]
    if missing:
        raise UsageError(f"--by {','.join(missing)}: no such column to group by in the scores; the scores carry "
                         f"{', '.join(usable)}")
    rows = []
    df = _sources_join_their_chains(df, by)
    df = df.assign(**{c: df[c].fillna("-") for c in by if df[c].dtype == object})  # not recorded: one group, "-"
    groups = df.groupby(["metric"] + list(by), dropna=False, sort=True)
    for keys, g in groups:
        keys = keys if isinstance(keys, tuple) else (keys,)
        r = sensitivity(g["score"].tolist(), g["step"].tolist(), g["chain_id"].tolist(),
                        lower_better=bool(g["lower_better"].iloc[0]), reference_step=reference_step,
                        check_steps=check_steps)
        rows.append({"metric": keys[0], "label": label(keys[0]), **{c: v for c, v in zip(by, keys[1:], strict=True)},
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


# Markdown's punctuation that can start a link, an emphasis, a code span, a heading or a cell: escaped
# (`_` only where it can open or close an emphasis: `different_chat` stays as it reads)
_MD_ESCAPES = str.maketrans({c: "\\" + c for c in "\\`*[]()#!|~"})


def md_cell(value) -> str:
    """A value as one Markdown table cell, shown as the text it is: a `|` or a line break would split the row,
    HTML (`<script>`) and Markdown (`[link](...)`, `**bold**`) in a group name would be rendered; a name of
    blanks alone would be an empty cell ("(blank)" instead)."""
    text = " ".join(str(value).split())
    if not text:
        return "(blank)" if str(value) else "(empty)"
    text = html.escape(text, quote=False).translate(_MD_ESCAPES)
    return re.sub(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])", r"\\_", text)


def format_number(x, pct=False):
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "n/a"
    return f"{100 * x:.0f} %" if pct else f"{x:+.2f}"


def _reading(metric: str, r: dict) -> str:
    """One sentence on how a metric reacted, computed from its protocol output."""
    name = label(metric)
    complete = r["n_chains"] - r["n_incomplete"]
    if not complete:
        return f"**{name}**: no complete chain to judge."
    rho = r["mean_rho"]
    trend = ("follows the damage over the whole chain" if rho is not None and rho <= -0.5 else
             "moves against the damage (scores the copies as better)" if rho is not None and rho >= 0.5 else
             "shows no consistent trend with the damage")
    return (f"**{name}** saw the damage at steps {', '.join(map(str, r['check_steps']))} in {r['n_passed']} of "
            f"{complete} chains (failure rate {format_number(r['failure_rate'], pct=True)}); its oriented score {trend} "
            f"(mean Spearman rho {format_number(rho)}), and the last step scores worse than step {r['reference_step']} in "
            f"{format_number(r['share_last_worse'], pct=True)} of chains.")


def _reading_guide(df: pd.DataFrame, results: dict, reference_step: int = DEFAULT_REFERENCE_STEP,
                   check_steps=DEFAULT_CHECK_STEPS) -> list[str]:
    """The report's terms (oriented score, d_k, rho), then what in these scores needs a word:
    a step-0 jump (the clean source scored far worse than the first copy) and scores that sit at
    the end of a metric's range (saturated: PIQE's 100 on a clean smooth image)."""
    ref = DEFAULT_REFERENCE_STEP
    lines = ["## Reading this report", "",
             "- **Oriented score**: the score with its sign turned so that *lower means worse* for every metric "
             "(a lower-is-better score such as NIQE's is negated).",
             f"- **d_k** = oriented score at step k - oriented score at step {reference_step}. Negative: the metric "
             f"saw the image get worse by step k. This report's test: a chain passes only when "
             f"{', '.join(f'd_{k}' for k in check_steps)} are all negative"
             + (" (the paper's test)." if tuple(check_steps) == DEFAULT_CHECK_STEPS and reference_step == ref else
                f" (the paper's: {', '.join(f'd_{k}' for k in DEFAULT_CHECK_STEPS)} against step {ref})."),
             "- **rho**: Spearman's rank correlation between step and oriented score over a chain: -1 when the "
             "score falls at every step (the metric follows the damage), near 0 when it does not notice, +1 "
             "when it scores the copies as better.",
             f"- **Why step {ref}, not step 0**: step 0 is the source as it was made; from step 1 on, every image "
             "is an editor's output. A metric often scores the source on a different footing (an AI-made, "
             "noise-free source, or a JPEG photograph), so the protocol measures change between outputs only."]
    for metric, r in results.items():
        rows = df[(df["metric"] == metric) & df["step"].isin([0, ref])]
        if rows.empty:
            continue
        sign = -1.0 if r["lower_better"] else 1.0
        wide = rows.pivot_table(index="chain_id", columns="step", values="score")
        if 0 in wide and ref in wide:
            jump = sign * (wide[0] - wide[ref])  # < 0: the source scored worse than the first copy
            spread = df.loc[df["metric"] == metric, "score"].astype(float)
            spread = float(np.nanpercentile(spread, 90) - np.nanpercentile(spread, 10)) if spread.notna().any() else 0
            worse = jump[jump < -max(spread, 1e-9) * 0.5].dropna()
            if len(worse):
                lines.append(f"- **Step-0 jump ({metric})**: in {len(worse)} of {len(jump.dropna())} chains the clean "
                             f"source scores far worse than the first copy (oriented change {jump[worse.index].mean():+.2f} "
                             f"on average, more than half the spread of all its scores). The metric reacts to what "
                             "the first edit changes (smoothing, re-encoding, the grain of a copy), not to quality: "
                             "read its curve from step 1.")
    for metric, r in results.items():
        spec = METRICS.get(metric)
        scores = df.loc[df["metric"] == metric, "score"].astype(float)
        if spec is None or scores.empty:
            continue
        ends = [v for v in spec.score_range if v is not None]
        at_end = scores[scores.isin(ends)]
        if len(at_end):
            lines.append(f"- **Saturated ({metric})**: {len(at_end)} of {len(scores)} scores sit at the end of its range "
                         f"({', '.join(f'{v:g}' for v in sorted(set(at_end)))}). There the metric cannot move any "
                         "further, so a change of the image does not show; PIQE, for one, gives 100 to a clean smooth "
                         "image with too few textured blocks to judge.")
    n_nan = sum(r["n_undefined_scores"] for r in results.values())
    lines.append(f"- **Undefined scores** (NaN) are images a metric cannot score (too small, unreadable, a uniform "
                 f"image whose statistics need variation): {n_nan} here; each is named under Missing scores. They "
                 "are never read as numbers.")
    return lines + [""]


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
                                                    rows["error"] if has_error else [None] * len(rows), strict=True)}
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
    panels = list(axes.flat)  # a grid of ncols: the last row may have panels to spare
    for ax, metric in zip(panels[: len(metrics)], metrics, strict=True):
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
        name = label(metric)
        fr = results[metric]["failure_rate"]
        if metric in (DETECTOR, RELATIVE):  # this toolkit's detector, not an NR-IQA metric: set apart
            ax.set_facecolor("#f3f3f3")
            name = f"detector: {name}"
        ax.set_title(f"{name} ({'lower' if sign < 0 else 'higher'} is better) - fails {format_number(fr, pct=True)}", fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylabel(f"oriented change vs step {reference_step}\n(down = worse)", fontsize=8)
    for ax in panels[len(metrics):]:
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


def _side_by_side(results: dict) -> list[str]:
    """One line setting the NR-IQA metrics' verdicts beside the detector's, when both were scored."""
    def seen(r):
        return f"{r['n_passed']} of {r['n_chains'] - r['n_incomplete']} chains"

    metrics = [m for m in results if m not in (DETECTOR, RELATIVE)]
    detectors = [m for m in (DETECTOR, RELATIVE) if m in results]
    if not metrics or not detectors:
        return []
    words = {DETECTOR: "edit_damage (alone)", RELATIVE: "edit_damage_rel (the damage added since step 0)"}
    return ["", "**Side by side**: " + "; ".join(f"{label(m)} saw the damage in {seen(results[m])}" for m in metrics)
            + ". This toolkit's detector: " + "; ".join(f"{words[m]} in {seen(results[m])}" for m in detectors)
            + " (docs/edit-damage.md: what it measures, and how far the bare score holds on an image alone)."]


def short_chains_note(df: pd.DataFrame, reference_step: int = DEFAULT_REFERENCE_STEP,
                      check_steps=DEFAULT_CHECK_STEPS) -> str | None:
    """A line when no chain reaches the last check step (a ten-step release read with the paper's
    steps 5, 10, 20): every verdict would be "incomplete", so say which steps to give instead."""
    last = int(df.groupby("chain_id")["step"].max().max())
    if last >= max(check_steps):
        return None
    fit = check_steps_for(last, reference_step)
    hint = f"; e.g. --check-steps {','.join(map(str, fit))} --reference-step {reference_step}" if fit else ""
    return (f"No chain reaches step {max(check_steps)} (the longest ends at step {last}), so no chain can be "
            f"judged at check steps {', '.join(map(str, check_steps))}: give the steps the chains have{hint}")


def _by_chat_and_variant(df: pd.DataFrame, reference_step: int, check_steps) -> list[str]:
    """The failure table split by chat mode and variant, when the scores hold more than one (a
    release's supplement): a same-chat chain and a different-chat chain are different experiments."""
    by = [c for c in ("chat_mode", "variant") if c in df and df[c].nunique(dropna=False) > 1]
    if not by:
        return []
    board = leaderboard(df, by, reference_step=reference_step, check_steps=check_steps)
    lines = ["", f"### By {' and '.join(c.replace('_', ' ') for c in by)}", "",
             f"| metric | {' | '.join(by)} | chains | failed | incomplete | failure rate | mean rho |",
             "| --- | " + " | ".join("---" for _ in by) + " | ---: | ---: | ---: | ---: | ---: |"]
    for r in board.to_dict("records"):
        lines.append(f"| {md_cell(r['metric'])} | " + " | ".join(md_cell(r[c]) for c in by)
                     + f" | {r['chains']} | {r['failed']} | {r['incomplete']} | {format_number(r['failure_rate'], pct=True)}"
                     f" | {format_number(r['mean_rho'])} |")
    return lines


def check_out_dir(out_dir: str | os.PathLike) -> None:
    """The report folder checked before any work: an existing file there is one line naming it (it was a raw
    "[Errno 17] File exists")."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: is a file; --out is the folder the report is written into "
                         f"(e.g. {out_dir.with_suffix('')}_report/)")


def write_report(scores: str | os.PathLike | pd.DataFrame, out_dir: str | os.PathLike, montage: Path | None = None,
                 name: str | None = None, reference_step: int = DEFAULT_REFERENCE_STEP,
                 check_steps=DEFAULT_CHECK_STEPS) -> Path:
    """Write report.md, sensitivity.png and summary.json into out_dir; return the report path.

    `scores`: a scores file, or a scores table (several files merged: `banana100.leaderboard`,
    then `name` says which). `montage`, when given, is an image (e.g. a chain's steps side by
    side) shown at the top. `reference_step` and `check_steps` are the protocol's (ten-step
    releases: e.g. 1 and 2, 5, 10).
    """
    df = scores if isinstance(scores, pd.DataFrame) else load_scores(scores)
    name = name or Path(scores).name
    check_out_dir(out_dir)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    check_steps = tuple(int(k) for k in check_steps)
    results = analyse(df, reference_step=reference_step, check_steps=check_steps)
    plot_path = plot(df, results, out_dir / "sensitivity.png", reference_step=reference_step)
    (out_dir / "summary.json").write_text(json.dumps(results, indent=1))

    editors = sorted(set(zip(df.get("editor", pd.Series(dtype=str)).fillna("?"), df.get("model", pd.Series(dtype=str)).fillna("?"), strict=True)))
    lines = [
        "# Banana100 sensitivity report",
        "",
        f"Scores: `{name}`: {df['chain_id'].nunique()} chains, "
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
    note = short_chains_note(df, reference_step, check_steps)
    if note:
        lines += [f"> **{note}**", ""]
        warnings.warn(note, stacklevel=2)
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
            f"| {format_number(r['failure_rate'], pct=True)} | {format_number(r['mean_rho'])} | {format_number(r['share_last_worse'], pct=True)} |"
        )
    lines += _side_by_side(results)
    lines += _by_chat_and_variant(df, reference_step, check_steps)
    lines += ["", f"![oriented score vs step]({plot_path.name})", "", "## How each metric reacted", ""]
    lines += [f"- {_reading(m, r)}" for m, r in results.items()]
    lines += ["", *_reading_guide(df, results, reference_step, check_steps)]
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
            lines.append(f"| {c['chain_id']} | {verdict} | " + " | ".join(format_number(c[k]) for k in dk) + f" | {format_number(c['rho'])} |")
        lines.append("")
    path = out_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
