"""Which metrics to score and whether they can be: the default set (which of it is at hand:
banana100.metrics.athand), every missing extra and file named before any work, the scorers built up front."""

from __future__ import annotations

import logging

log = logging.getLogger("banana100.scoring")


#: `banana100 score` without --metrics: these, where their files are at hand (PIQE needs none).
DEFAULT_METRICS = ("piqe", "niqe", "brisque")


def check_metrics_ready(metrics: list[str], backend: str | None = None) -> None:
    """Before any work: every metric's extra is installed and every file present (no download
    when offline). One error, on one line, names every missing extra and every missing file of
    every metric; the metrics that are ready are named too."""
    from banana100 import extras
    from banana100.errors import MissingExtraError, WeightsNotFoundError
    from banana100.metrics.resolve import PYIQA_PREFIX, resolve
    from banana100.metrics.weights import ENV_VAR, hub_unreachable, missing, offline

    need_extra, lacking, by_pyiqa = {}, {}, {}  # metric -> the extra it lacks / its files not at hand / pyiqa's
    for m in metrics:
        r = resolve(m)
        if r.kind in ("module", "relative"):  # a user's module is probed when resolved; edit_damage_rel needs nothing
            continue
        if r.kind == "pyiqa":  # pyiqa fetches its own weights: offline, only a build says they are at hand
            extra = "deep"
            if extras.extra_installed(extra) and (offline() or hub_unreachable()):
                from banana100.metrics.resolve import check_pyiqa_buildable

                files = check_pyiqa_buildable(m)
                if files:
                    by_pyiqa[m] = [u.rsplit("/", 1)[-1] for u in files]
        else:
            b = "pyiqa" if m.startswith(PYIQA_PREFIX) else (backend if r.kind == "table" else None)
            extra = None if r.spec.check_backend(b) == "native" else r.spec.extra
            files = missing(r.spec.name, b)
            if files:
                lacking[m] = files
        if extra and not extras.extra_installed(extra):
            need_extra[m] = extra
    if lacking and not offline() and not hub_unreachable():
        lacking = {}  # online: the engine downloads what is missing (one quick probe says so)
    if not need_extra and not lacking and not by_pyiqa:
        return
    ready = [m for m in metrics if m not in lacking and m not in need_extra and m not in by_pyiqa]
    parts = []
    for extra in dict.fromkeys(need_extra.values()):
        names = [m for m, e in need_extra.items() if e == extra]
        parts.append(f"{', '.join(names)} need{'s' if len(names) == 1 else ''} the '{extra}' extra "
                     f"({extras.install_hint(extra)})")
    if lacking:
        parts.append("missing files: " + "; ".join(f"{m}: {', '.join(files)}" for m, files in lacking.items())
                     + f" (put them in ${ENV_VAR}; `banana100 weights list {' '.join(lacking)} -v` says where "
                     f"each comes from, `banana100 weights download {' '.join(lacking)}` fetches them online)")
    if by_pyiqa:
        import os

        import torch.hub

        parts.append("missing files: " + "; ".join(f"{m}: {', '.join(files)}" for m, files in by_pyiqa.items())
                     + f" (pyiqa reads them from {os.path.join(torch.hub.get_dir(), 'pyiqa')} and downloads them "
                     "itself: run it once where there is internet)")
    message = "; ".join(parts) + (f"; ready: {', '.join(ready)}" if ready else "")
    raise (MissingExtraError if need_extra else WeightsNotFoundError)(message)


def build_scorers(metrics: list[str], device: str | None = None, batch_size: int | None = None,
                  backend: str | None = None, mode: str = "pyiqa", precision: str = "exact", **options) -> dict:
    """Load every metric before any work, so a missing parameter file stops the run at once.

    `metrics` are any names `banana100.metrics.resolve` knows (the table, `pyiqa:<id>`, a user's
    evaluate module). `batch_size` caps every metric's batches; None gives each metric its own
    default (8 images; VisualQuality-R1: as many as the free memory holds). `backend=None` gives
    each metric its default backend; "pyiqa" forces pyiqa
    for the table's metrics (evaluators and user metrics keep their own). `mode="official"`
    applies to the metrics that have it (native backend); `precision="fast"` to the metric table's
    and pyiqa's (the others are scored as they are, their `precision` says "exact"). `options`
    (max_pixels, keep_text) go to VisualQuality-R1.
    """
    from banana100.metrics.resolve import make_scorer, resolve

    resolved = [resolve(m) for m in metrics]
    plain = [r.name for r in resolved if "native" not in r.spec.backends]
    if mode == "official" and backend != "pyiqa" and plain:
        log.warning("no official mode for %s; those are scored in pyiqa mode (the `mode` column says which)",
                    ", ".join(plain))
    if precision != "exact" and (other := [r.name for r in resolved if r.kind not in ("table", "pyiqa")]):
        log.warning("no fast precision for %s; those are scored exactly (the `precision` column says which)",
                    ", ".join(other))
    return {r.name: make_scorer(r.name, device=device, batch_size=batch_size,
                                backend=backend if r.kind == "table" else None,
                                mode=mode if r.name not in plain else "pyiqa",
                                precision=precision,
                                **(options if r.kind == "evaluator" else {})) for r in resolved}
