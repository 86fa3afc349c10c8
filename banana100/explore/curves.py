"""Scores as the Space shows them: a scores table from a path or the Hub, one chain's curves
(oriented, normalised) and their plot, the protocol's verdicts per chain and the summary."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from banana100.errors import Banana100Error
from banana100.explore.common import DETECTOR, RELATIVE, metric_label
from banana100.protocol import DEFAULT_CHECK_STEPS, DEFAULT_REFERENCE_STEP
from banana100.metrics.table import METRICS


def load_scores_any(location: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """A scores table (`banana100 score`) from a local path or `hf://datasets/<owner>/<name>/<file>`."""
    from banana100.report import load_scores

    text = str(location)
    if text.startswith("hf://datasets/"):
        parts = text[len("hf://datasets/"):].split("/", 2)
        if len(parts) != 3:
            raise Banana100Error(f"{text}: expected hf://datasets/<owner>/<name>/<file.parquet>")
        from huggingface_hub import hf_hub_download

        try:
            text = hf_hub_download(f"{parts[0]}/{parts[1]}", parts[2], repo_type="dataset",
                                   cache_dir=None if cache_dir is None else str(Path(cache_dir) / "hub"))
        except Exception as e:  # noqa: BLE001
            raise Banana100Error(f"cannot download {location} ({type(e).__name__}: {e})") from None
    return load_scores(text)


def chain_curves(scores: pd.DataFrame, chain_id: str) -> pd.DataFrame:
    """Every metric's scores for one chain, oriented (down = worse) and normalised to [0, 1].

    Columns: metric, label, step, score, oriented (score, negated for lower-is-better
    metrics, as the protocol orients it), normalised (oriented min-max scaled over the chain:
    1 = the metric's best score on this chain, 0 = its worst; 0.5 when the metric is flat).
    """
    rows = scores[(scores["chain_id"] == chain_id) & scores["score"].notna()]
    parts = []
    for metric, g in rows.groupby("metric", sort=False):
        g = g.sort_values("step")
        sign = -1.0 if bool(g["lower_better"].iloc[0]) else 1.0
        oriented = sign * g["score"].astype(float)
        lo, hi = oriented.min(), oriented.max()
        norm = (oriented - lo) / (hi - lo) if hi > lo else oriented * 0 + 0.5
        parts.append(pd.DataFrame({"metric": metric, "label": metric_label(metric), "step": g["step"].astype(int),
                                   "score": g["score"].astype(float), "oriented": oriented, "normalised": norm}))
    if not parts:
        return pd.DataFrame(columns=["metric", "label", "step", "score", "oriented", "normalised"])
    order = {m: i for i, m in enumerate(METRICS)}
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["metric", "step"], key=lambda s: s.map(order).fillna(len(order)) if s.name == "metric" else s,
                           kind="stable", ignore_index=True)


def plot_curves(curves: pd.DataFrame, step: int | None = None, title: str | None = None,
                check_steps=DEFAULT_CHECK_STEPS, reference_step: int = DEFAULT_REFERENCE_STEP,
                last_step: int | None = None):
    """A matplotlib figure of `chain_curves` output: normalised oriented score vs step, down = worse."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 3.8), dpi=100)
    metrics = list(dict.fromkeys(curves["metric"])) if len(curves) else []
    for metric in metrics:
        g = curves[curves["metric"] == metric]
        spec = METRICS.get(metric)
        direction = f" ({'lower' if spec.lower_better else 'higher'} is better)" if spec else ""
        if metric == DETECTOR:  # ours, not one of the paper's metrics: drawn apart
            ax.plot(g["step"], g["normalised"], lw=2.6, ls="--", color="black", marker="s", ms=3,
                    label=f"{metric_label(metric)} (this toolkit's detector; lower is better)")
            continue
        if metric == RELATIVE:  # the detector against the chain's step 0
            ax.plot(g["step"], g["normalised"], lw=2.6, color="black", marker="s", ms=3,
                    label=f"{metric_label(metric)} (detector, damage since step 0; lower is better)")
            continue
        ax.plot(g["step"], g["normalised"], lw=1.8, marker="o", ms=2.5, label=f"{metric_label(metric)}{direction}")
    xmax = last_step if last_step is not None else (int(curves["step"].max()) if len(curves) else 20)
    for k in check_steps:
        if k <= xmax:
            ax.axvline(k, color="0.7", ls=":", lw=1)
    if reference_step <= xmax:
        ax.axvline(reference_step, color="0.7", ls="--", lw=1)
    if step is not None:
        ax.axvline(step, color="crimson", lw=2.2, alpha=0.85)
        ax.text(step, 1.06, f" step {step}", color="crimson", fontsize=9, va="bottom", ha="left" if step < 0.8 * xmax else "right")
    ax.set_xlim(-0.5, max(xmax, 1) + 0.5)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(-0.08, 1.13)
    ax.set_yticks([0, 0.5, 1])
    ax.set_yticklabels(["worst", "", "best"])
    ax.set_xlabel("step (copies of a copy)")
    ax.set_ylabel("metric's verdict on the image\n(normalised; down = worse)", fontsize=9)
    if not metrics:
        ax.text(0.5, 0.5, "no scores for this chain", ha="center", va="center", transform=ax.transAxes, color="0.4")
    else:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(title or "A metric that sees the damage goes down as the steps go up", fontsize=10)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.3g}"


VERDICT_TEXT = {True: "pass (saw it)", False: "FAIL (missed it)", None: "incomplete"}


def verdict_table(results: dict, chain_id: str, check_steps=DEFAULT_CHECK_STEPS) -> pd.DataFrame:
    """The protocol's verdict per metric for one chain, from `report.analyse` output."""
    rows = []
    for metric, r in results.items():
        chain = next((c for c in r["per_chain"] if c["chain_id"] == chain_id), None)
        if chain is None:
            continue
        row = {"metric": metric_label(metric), "direction": "lower better" if r["lower_better"] else "higher better",
               "verdict": VERDICT_TEXT[chain["passed"]]}
        row.update({f"d{k}": _fmt(chain.get(f"d_{k}")) for k in r["check_steps"]})
        row["rho"] = _fmt(chain["rho"])
        rows.append(row)
    if rows:
        return pd.DataFrame(rows)
    return pd.DataFrame(columns=["metric", "direction", "verdict", *(f"d{k}" for k in check_steps), "rho"])


def summary_table(results: dict) -> pd.DataFrame:
    """Failure rate per metric over all chains, from `report.analyse` output."""
    rows = []
    for metric, r in results.items():
        fr = r["failure_rate"]
        rows.append({"metric": metric_label(metric), "chains": r["n_chains"], "passed": r["n_passed"],
                     "failed": r["n_failed"], "incomplete": r["n_incomplete"],
                     "failure rate": "n/a" if fr is None else f"{100 * fr:.0f} %",
                     "mean rho": _fmt(r["mean_rho"])})
    return pd.DataFrame(rows, columns=["metric", "chains", "passed", "failed", "incomplete", "failure rate", "mean rho"])
