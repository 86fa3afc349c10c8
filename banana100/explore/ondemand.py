"""Scores computed on demand, one chain and metric at a time, cached on disk (`ChainScores`)."""

from __future__ import annotations

import io
import os
import re
import threading
from pathlib import Path

import pandas as pd

from banana100.errors import Banana100Error, ImageReadError
from banana100.explore.sources import ChainInfo
from banana100.fileio import write_file_atomic
from banana100.schema import DEFAULT_CHAT_MODE
from banana100.metrics.table import METRICS


#: Steps scored on demand: every step to 10 (the protocol's 1, 5, 10 and the early curve), then
#: sparser (20 is the protocol's last check). About 22 images for a 100-step chain.
ON_DEMAND_STEPS = (*range(11), 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100)

_SCORERS: dict[tuple, object] = {}
_SCORERS_LOCK = threading.Lock()


def _scorer(metric: str, device: str, backend: str):
    from banana100.metrics.resolve import make_scorer, resolve

    key = (metric, device, backend)
    with _SCORERS_LOCK:
        if key not in _SCORERS:  # any metric the resolver knows: the table, pyiqa:<id>, a user's module
            table = resolve(metric).kind == "table"
            _SCORERS[key] = make_scorer(metric, device=device, backend=backend if table else None, batch_size=4)
        return _SCORERS[key]


class ChainScores:
    """Scores of one chain and metric, computed when first asked for and cached on disk.

    The cache key is (chain, metric, backend): `<root>/<chain_id>/<metric>__<backend>.parquet` (the bare
    edit_damage's also names its detector version: `...__native__v2.parquet`),
    one row per scored step in the columns of a `banana100 score` table. Scoring goes through
    the library's engine (`engine.MetricScorer`, each metric's default backend unless told),
    a few images at a time so that `progress(fraction, text)` can follow it; a later call for
    more steps scores only the missing ones.
    """

    def __init__(self, root: str | os.PathLike, device: str = "cpu", backend: str | None = None,
                 steps=ON_DEMAND_STEPS):
        self.root = Path(root)
        self.device = device
        self.backend = backend
        self.steps = tuple(int(s) for s in steps)

    def backend_of(self, metric: str) -> str:
        from banana100.metrics.resolve import resolve

        if metric in METRICS:
            return METRICS[metric].check_backend(self.backend)
        return resolve(metric).spec.default_backend  # pyiqa:<id>: pyiqa; a user's module: evaluate

    def path(self, chain_id: str, metric: str) -> Path:
        if not chain_id or "/" in chain_id or chain_id.startswith("."):
            raise Banana100Error(f"unusable chain id {chain_id!r}")
        safe = re.sub(r"[^\w.+-]", "_", metric)  # a user's metric may be a path or a Hub id
        return self.root / chain_id / f"{safe}__{self.backend_of(metric)}{_version_tag(metric)}.parquet"

    def cached(self, chain_id: str, metric: str) -> pd.DataFrame | None:
        path = self.path(chain_id, metric)
        return pd.read_parquet(path) if path.is_file() else None

    def wanted(self, info: ChainInfo) -> list[int]:
        return [s for s in info.steps if s in set(self.steps)] or list(info.steps)

    def missing(self, info: ChainInfo, metric: str) -> list[int]:
        have = self.cached(info.chain_id, metric)
        done = set() if have is None else {int(s) for s in have["step"]}
        return [s for s in self.wanted(info) if s not in done]

    def compute(self, info: ChainInfo, metric: str, images: dict, progress=None, device: str | None = None,
                chunk: int = 4) -> pd.DataFrame:
        """Score the chain's missing steps (`images`: {step: path or bytes}); the whole cached table."""
        from banana100.metrics.resolve import resolve

        spec = resolve(metric).spec
        before = self.cached(info.chain_id, metric)
        todo = [s for s in self.missing(info, metric) if s in images]
        scorer = _scorer(metric, device or self.device, self.backend_of(metric))
        rows = []
        for i in range(0, len(todo), chunk):
            if progress is not None:
                progress(i / max(1, len(todo)), f"{spec.display_name}: scoring {info.chain_id}, "
                                                f"{i} of {len(todo)} images")
            part = todo[i:i + chunk]
            scores, errors = _score_part(scorer, [images[s] for s in part], _reference(scorer, images))
            for j, (step, score) in enumerate(zip(part, scores, strict=True)):
                # an image with no score (uniform, unreadable, too small) is a row with its error,
                # as in `banana100 score`: the protocol then names that step as missing
                rows.append({"chain_id": info.chain_id, "source_id": info.source_id, "setting": info.setting,
                             "repeat": info.repeat, "chat_mode": info.chat_mode or DEFAULT_CHAT_MODE,
                             "variant": info.variant, "step": step, "metric": metric,
                             "score": float("nan") if score is None else float(score),
                             "lower_better": spec.lower_better, "error": errors.get(j), "backend": scorer.backend,
                             "mode": scorer.mode})
        table = pd.DataFrame(rows)
        if before is not None:
            table = pd.concat([before, table], ignore_index=True) if len(table) else before
        table = table.sort_values("step", ignore_index=True)
        if rows:
            path = self.path(info.chain_id, metric)
            sink = io.BytesIO()
            table.to_parquet(sink, index=False)
            write_file_atomic(path, sink.getvalue())  # banana100.fileio: one way to write a file whole
        return table


def _version_tag(metric: str) -> str:
    """"__v3" for edit_damage and edit_damage_rel (the metric table's version of the detector: a cache of an earlier
    detector's scores is not read), "" for every other metric."""
    from banana100.metrics.table import get_metric

    # edit_damage_rel changed with the detector (version 3): its cache names the version too
    return f"__v{get_metric('edit_damage').version}" if metric in ("edit_damage", "edit_damage_rel") else ""


def _reference(scorer, images: dict):
    """The chain's step 0, for a scorer that measures against a reference (edit_damage_rel); else None."""
    if not scorer.needs_reference:
        return None
    if 0 not in images:
        raise Banana100Error("edit_damage_rel needs the chain's step 0 (its source), which this chain lacks")
    return images[0]


def _score_part(scorer, images: list, reference=None) -> tuple[list, dict[int, str]]:
    """Scores of `images` (None where an image has none) and {index: error text}, as `banana100
    score` gives them: each image decoded alone, and a failure isolated to its image
    (`banana100.metrics.engine.feed`)."""
    from banana100.imageio import load_rgb
    from banana100.metrics.engine.contract import Scores, image_names, isolating
    from banana100.metrics.engine.feed import blame_any

    names = image_names(images)
    arrays: list = []
    errors: dict[int, str] = {}
    for i, image in enumerate(images):
        try:
            arrays.append(load_rgb(image))
        except ImageReadError as e:
            arrays.append(None)
            errors[i] = f"{names[i]}: {e}"
    ok = [i for i, a in enumerate(arrays) if a is not None]

    def run(idx: list[int]) -> Scores:
        part, part_names = [arrays[i] for i in idx], [names[i] for i in idx]
        return scorer.measure(part, part_names) if reference is None else scorer.measure(
            part, part_names, references=reference)

    pairs = isolating(run, ok, blame_any(names)) if ok else []
    scored = Scores.gather(len(images), [(idx, got if isinstance(got, Scores) else Scores.failed(len(idx), got))
                                         for idx, got in pairs])
    errors.update({i: str(e) for i, e in scored.errors.items()})
    return scored.scores, errors
