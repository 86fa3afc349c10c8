"""`Explorer`: a set of chains (images) and their scores, ready to show: curves, verdicts, summary,
leaderboard, the why-it-fails view, and scores computed on demand for the chain on screen."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from banana100.errors import Banana100Error
from banana100.explore.common import CHECK_STEPS_ENV, metric_label
from banana100.explore.curves import chain_curves, load_scores_any, summary_table, verdict_table
from banana100.explore.ondemand import ChainScores
from banana100.explore.sources import ChainImages, ChainInfo
from banana100.explore.why import why_view
from banana100.protocol import DEFAULT_CHECK_STEPS, DEFAULT_REFERENCE_STEP, check_steps_for


def protocol_steps(images: ChainImages, check_steps=None, reference_step: int = DEFAULT_REFERENCE_STEP,
                   env=None) -> tuple[int, ...]:
    """The check steps the Space judges chains at: `check_steps`, else $BANANA100_SPACE_CHECK_STEPS
    ("2,5,10"), else the paper's 5, 10, 20 scaled to the longest chain (2, 5, 10 for ten steps)."""
    env = os.environ if env is None else env
    if check_steps is None and (env.get(CHECK_STEPS_ENV) or "").strip():
        text = env[CHECK_STEPS_ENV]
        try:
            check_steps = [int(k) for k in text.split(",") if k.strip()]
        except ValueError:
            raise Banana100Error(f"{CHECK_STEPS_ENV}={text!r}: expected whole steps, comma-separated (e.g. 2,5,10)") from None
    if check_steps is None:
        last = max((c.last_step for c in images.chains.values()), default=max(DEFAULT_CHECK_STEPS))
        check_steps = check_steps_for(last, reference_step) or DEFAULT_CHECK_STEPS
    steps = tuple(sorted({int(k) for k in check_steps}))
    if not steps or min(steps) <= reference_step:
        raise Banana100Error(f"check steps {list(steps)}: need at least one, each after the reference step {reference_step}")
    return steps


class Explorer:
    """A set of chains (images) and their scores, ready to show.

    Scores come from a table given up front (a `banana100 score` file), from `on_demand`
    (a `ChainScores` cache: `score_chain` fills it for the chain being looked at), or both.
    `summary()` then covers the chains scored so far (`scored_chains()`).
    """

    def __init__(self, images: ChainImages, scores: pd.DataFrame | None, note: str = "",
                 on_demand: ChainScores | None = None, metrics=(), check_steps=None,
                 reference_step: int = DEFAULT_REFERENCE_STEP):
        self.images = images
        self.reference_step = int(reference_step)
        self.check_steps = protocol_steps(images, check_steps, self.reference_step)
        self.note = note
        self.on_demand = on_demand
        self.on_demand_metrics = list(metrics)
        self._lock = threading.Lock()
        self._originals: dict = {}
        self.scores = None
        self.results: dict = {}
        tables = [scores] if scores is not None and len(scores) else []
        if on_demand is not None:  # what earlier visits already scored
            for cid in images.chains:
                for m in self.on_demand_metrics:
                    t = on_demand.cached(cid, m)
                    if t is not None and len(t):
                        tables.append(t)
        if tables:
            self.add_scores(pd.concat(tables, ignore_index=True))

    @classmethod
    def open(cls, data: str | os.PathLike, scores: str | os.PathLike | None = None,
             cache_dir: str | os.PathLike | None = None, note: str = "") -> Explorer:
        images = ChainImages.open(data, cache_dir=cache_dir)
        table = load_scores_any(scores, cache_dir) if scores else None
        return cls(images, table, note)

    def add_scores(self, table: pd.DataFrame) -> None:
        """Merge more scores (a later row for the same chain, step and metric wins) and re-judge."""
        from banana100.report import analyse

        with self._lock:
            merged = table if self.scores is None else pd.concat([self.scores, table], ignore_index=True)
            merged = merged.drop_duplicates(["chain_id", "step", "metric"], keep="last", ignore_index=True)
            self.scores = merged
            self.results = analyse(merged, reference_step=self.reference_step,
                                   check_steps=self.check_steps) if len(merged) else {}

    def missing_metrics(self, chain_id: str) -> list[str]:
        """On-demand metrics with steps of this chain not yet scored."""
        if self.on_demand is None:
            return []
        info = self.info(chain_id)
        return [m for m in self.on_demand_metrics if self.on_demand.missing(info, m)]

    def load_cached(self, chain_id: str) -> None:
        """Take in what the on-demand cache holds for this chain (scored in another process, say)."""
        if self.on_demand is None:
            return
        tables = [t for m in self.on_demand_metrics if (t := self.on_demand.cached(chain_id, m)) is not None and len(t)]
        if tables:
            self.add_scores(pd.concat(tables, ignore_index=True))

    def score_chain(self, chain_id: str, metrics=None, progress=None, device: str | None = None) -> None:
        """Score this chain's missing steps with the on-demand metrics (or `metrics`), cached."""
        if self.on_demand is None:
            return
        todo = list(metrics) if metrics is not None else self.missing_metrics(chain_id)
        if not todo:
            return
        info = self.info(chain_id)
        if progress is not None:
            progress(0.0, f"fetching {chain_id}")
        images = self.images.originals(chain_id)
        for i, metric in enumerate(todo):
            sub = None
            if progress is not None:
                def sub(frac, text, i=i):
                    progress((i + frac) / len(todo), text)
            self.add_scores(self.on_demand.compute(info, metric, images, progress=sub, device=device))
        if progress is not None:
            progress(1.0, f"{chain_id}: scored")

    def scored_chains(self) -> int:
        return 0 if self.scores is None else int(self.scores["chain_id"].nunique())

    def chain_ids(self) -> list[str]:
        return self.images.chain_ids()

    def info(self, chain_id: str) -> ChainInfo:
        if chain_id not in self.images.chains:
            raise Banana100Error(f"unknown chain {chain_id!r}")
        return self.images.chains[chain_id]

    def find(self, source_id: str, setting: str, repeat: int | str) -> str | None:
        """The chain of a source and setting picked by its repeat, or by its `ChainInfo.choice`
        (kind and repeat) where chains of one repeat differ in variant or chat mode."""
        for cid, c in self.images.chains.items():
            if (c.source_id, c.setting, str(c.choice)) == (source_id, setting, str(repeat)):
                return cid
        return None

    def image(self, chain_id: str, step: int) -> Image.Image:
        return self.images.image(chain_id, int(step))

    def full_image(self, chain_id: str, step: int) -> np.ndarray:
        """One step at full size (HxWx3 uint8); the last chain's files (or bytes) are kept."""
        from banana100.imageio import load_rgb

        with self._lock:
            originals = self._originals.get(chain_id)
        if originals is None:
            originals = self.images.originals(chain_id)
            with self._lock:
                self._originals = {chain_id: originals}
        if int(step) not in originals:
            raise Banana100Error(f"chain {chain_id} has no step {step}")
        return load_rgb(originals[int(step)])

    def why(self, chain_id: str, step: int, reference_step: int = DEFAULT_REFERENCE_STEP) -> dict:
        """`why_view` of one step of a chain against its reference step (step 1)."""
        info = self.info(chain_id)
        ref = reference_step if reference_step in info.steps else min(info.steps)
        source = self.full_image(chain_id, 0) if 0 in info.steps else None
        return why_view(self.full_image(chain_id, ref), self.full_image(chain_id, step), source=source)

    def curves(self, chain_id: str) -> pd.DataFrame:
        if self.scores is None:
            return chain_curves(pd.DataFrame(columns=["chain_id", "metric", "step", "score", "lower_better"]), chain_id)
        return chain_curves(self.scores, chain_id)

    def metrics(self) -> list[str]:
        return list(dict.fromkeys([*self.results, *self.on_demand_metrics]))

    def verdicts(self, chain_id: str) -> pd.DataFrame:
        return verdict_table(self.results, chain_id, self.check_steps)

    def summary(self) -> pd.DataFrame:
        return summary_table(self.results)

    def leaderboard_columns(self) -> list[str]:
        """What the leaderboard groups by: setting, and editor when the scores carry it; chat mode
        and variant when they take more than one value (a release's supplement)."""
        if self.scores is None:
            return []
        s = self.scores
        return ([c for c in ("setting", "editor") if c in s and s[c].notna().any()]
                + [c for c in ("chat_mode", "variant") if c in s and s[c].nunique(dropna=False) > 1])

    def leaderboard(self) -> pd.DataFrame:
        """The leaderboard of the scores held (banana100.leaderboard), as the Space shows it."""
        from banana100.leaderboard import leaderboard

        by = self.leaderboard_columns()
        if self.scores is None or not len(self.scores):
            return pd.DataFrame(columns=["metric", *by, "chains", "failed", "failure rate", "mean rho"])
        with self._lock:
            board = leaderboard(self.scores, by, reference_step=self.reference_step, check_steps=self.check_steps)
        return pd.DataFrame({"metric": board["label"], **{c: board[c] for c in by}, "chains": board["chains"],
                             "failed": board["failed"],
                             "failure rate": [f"{100 * r:.0f} %" if r == r and r is not None else "n/a"
                                              for r in board["failure_rate"]],
                             "mean rho": [f"{r:+.2f}" if r == r and r is not None else "n/a" for r in board["mean_rho"]]})

    def leaderboard_png(self, path: str | os.PathLike) -> Path | None:
        """The leaderboard's heatmap (metrics x groups) written to `path`; None without scores."""
        from banana100.leaderboard import heatmap, leaderboard

        if self.scores is None or not len(self.scores):
            return None
        with self._lock:
            board = leaderboard(self.scores, self.leaderboard_columns(), reference_step=self.reference_step,
                                check_steps=self.check_steps)
        return heatmap(board, self.leaderboard_columns(), Path(path))

    def failure_sentence(self) -> str:
        """Which metrics failed on these chains, in words, from the protocol's results."""
        parts = []
        for metric, r in self.results.items():
            complete = r["n_chains"] - r["n_incomplete"]
            if complete:
                parts.append(f"{metric_label(metric)} missed the damage in {r['n_failed']} of {complete} chains")
        return "; ".join(parts)
