"""Native batched torch implementations of the hand-crafted metrics.

pyiqa scores the hand-crafted family one image at a time with Python loops over patches (IL-NIQE
takes seconds an image on two cores: BENCHMARKS.md, "Metrics"). These are the same computations as batched tensor code:
same-size images go through together, patches are vectorised, large filters use FFTs, and the
code runs unchanged on CPU and GPU.

The contract every `banana100/metrics/native/<metric>.py` keeps:

    build(files: Mapping[str, Path], mode: str = "pyiqa") -> torch.nn.Module

- `files` maps each parameter file's table name (`banana100.metrics.table`, e.g.
  "niqe_modelparameters.mat") to its local path; the module reads the original formats
  directly (LIVE LIBSVM `allmodel`/`allrange`, `.mat` files), no converted file.
- `forward(x)` takes a Bx3xHxW float32 tensor in [0, 1] (what `engine.to_tensor` gives: RGB, a
  grayscale image arrives as three equal channels) on the module's device, and returns a
  float64 tensor of B scores. A batch holds images of one size; the score of an image never
  depends on the others in its batch.
- `mode="pyiqa"` reproduces pyiqa 0.1.16's `create_metric(name)` scores (relative difference
  under 1e-3; BRISQUE 1e-2). `mode="official"` reproduces the original (MATLAB) releases, the
  published values in `../shared/reference-images`, from which pyiqa departs (by how much: each
  metric's card, generated from agreement.json).
- `build` wraps the module's forward so that it runs in IEEE float32 whatever torch's TF32 flags
  (`precision.float32_precision`; `module.allow_tf32 = True` is the engine's precision="fast").
- After each forward, `module.last_flat_share` (B,) float64, on the module's device (the engine
  fetches it with the scores, without a wait per batch), holds each image's share of
  full-scale windows that are flat or exact ramps (`repair.leftover_share`, or `repair.centred_share`
  from the metric's own filtering): the regime where a
  score depends on rounding (FlatRegionWarning above FLAT_WARN_SHARE; the cards say how far).
- Buffers (model parameters) are registered so that `.to(device)` moves them. The statistics
  and the final scores are float64 on CPU and GPU alike; mode "pyiqa" does in float32 the steps
  pyiqa does in float32 where their rounding shows in the score (BRISQUE's filtering, PIQE's local
  deviation, IL-NIQE's resize and filters), because matching pyiqa means matching that rounding.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Mapping
from pathlib import Path

import torch

from banana100.metrics.native import matlab  # noqa: F401 - the primitives every metric here uses
from banana100.metrics.precision import float32_precision

MODES = ("pyiqa", "official")


class FlatRegionWarning(UserWarning):
    """An image has many flat windows (or exact ramps): there its MSCN coefficients are rounding
    leftovers, so its score depends on the arithmetic. mode "pyiqa" still reproduces pyiqa on
    the same device, but pyiqa's own score there changes with its convolution backend; mode
    "official" cannot reproduce the MATLAB releases' leftovers (see the metric card)."""


# Leftover share (`last_flat_share`) above which a score gets a FlatRegionWarning, per metric:
# where, in bench/metrics/flat_regime.py (banana100/metrics/native/flat_regime.json), the official scores' spread
# over the possible leftover signs passed the 0.5 % the official mode aims at. None: no warning
# (PIQE: insensitive, its criteria are thresholds far above rounding; NRQM: not measured here).
FLAT_WARN_SHARE: dict[str, float | None] = {
    "brisque": 0.0025, "niqe": 0.015, "ilniqe": 0.05, "pi": 0.015, "piqe": None, "nrqm": None,
}


def warn_if_flat(metric: str, shares, names) -> None:
    """Warn (FlatRegionWarning) for the images whose leftover share exceeds FLAT_WARN_SHARE[metric]."""
    import warnings

    threshold = FLAT_WARN_SHARE.get(metric)
    if threshold is None:
        return
    flat = [(n, s) for n, s in zip(names, shares, strict=True) if s is not None and s > threshold]
    if flat:
        listed = "; ".join(f"{n}: {s:.1%}" for n, s in flat[:5]) + (f"; and {len(flat) - 5} more" if len(flat) > 5 else "")
        warnings.warn(
            f"{metric}: {len(flat)} image(s) with over {threshold * 100:g} % flat windows (flat areas, clipped "
            f"highlights or exact ramps) where the score depends on rounding, not on the image ({listed}); "
            "see 'flat_share' and the metric card", FlatRegionWarning, stacklevel=3)


def build(metric: str, files: Mapping[str, Path], mode: str = "pyiqa") -> torch.nn.Module:
    """The native module for `metric` (a metric the table marks `native`) in `mode` ("pyiqa" or
    "official")."""
    from banana100.metrics.table import METRICS

    if metric not in METRICS or not METRICS[metric].native:
        native = [n for n, spec in METRICS.items() if spec.native]
        raise ValueError(f"no native implementation of {metric!r}; native: {', '.join(native)}")
    if mode not in MODES:
        raise ValueError(f"{metric}: mode must be one of {MODES}, got {mode!r}")
    module = METRICS[metric].native_module or f"{__name__}.{metric}"
    return exact_forward(importlib.import_module(module).build(files, mode=mode))


def _guarded_forward(self, *args, **kwargs):
    with float32_precision(self.allow_tf32):
        return type(self).forward(self, *args, **kwargs)


def exact_forward(model: torch.nn.Module) -> torch.nn.Module:
    """`model` whose forward runs in IEEE float32 whatever the user's TF32 flags (TF32 moved
    BRISQUE's CUDA scores up to 8 % from the CPU's), unless `model.allow_tf32` is set (the
    engine's precision="fast"); the flags come back afterwards (`precision.float32_precision`)."""
    model.allow_tf32 = False
    model.forward = types.MethodType(_guarded_forward, model)
    return model


def safe_flat_share(rows, target: float = 0.005) -> float:
    """The largest leftover share up to which every measured official spread stayed within
    `target` (rows of banana100/metrics/native/flat_regime.json): how FLAT_WARN_SHARE was chosen."""
    rows = sorted(rows, key=lambda r: r["leftover_share"])
    safe = 0.0
    for r in rows:
        if r["official_spread"] > target:
            break
        safe = r["leftover_share"]
    return safe
