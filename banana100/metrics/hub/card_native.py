"""The metric cards' sections on the native backend: its measured agreement with pyiqa and with
the original releases, and what it does in flat windows (the flat regime). Part of the cards
(`banana100.metrics.hub.cards` renders them); the numbers come from the JSON files that
bench/metrics/native_agreement.py and bench/metrics/flat_regime.py write into banana100/metrics/native/.
"""

from __future__ import annotations

import json
from pathlib import Path

from banana100.metrics.table import MetricSpec

PYIQA_VERSION = "0.1.16"
# The measurements the cards quote, shipped in the wheel as package data (a clone and an install
# write the same cards): bench/metrics/native_agreement.py and bench/metrics/flat_regime.py write them.
NATIVE_DATA = Path(__file__).parents[1] / "native"


def _native_agreement_results() -> dict:
    """The measured agreement of the native metrics (bench/metrics/native_agreement.py)."""
    return json.loads((NATIVE_DATA / "agreement.json").read_text()).get("metrics", {})


# Why a native metric's largest difference from pyiqa is what it is (measured; see the tests).
_NATIVE_NOTES = {
    "brisque": (
        "pyiqa computes BRISQUE in float32: its own score of an image moves by up to 0.002 with the "
        "other images in its batch. The worst case, pepper_1 (score 0.75), is a fit's shape value "
        "landing on the other side of a 0.001 step of the lookup grid: pyiqa's float32 ratio and the "
        "native one straddle the step, and pyiqa run in float64 lands where the native code does "
        "(tests/metrics/native/test_native_brisque.py). The bound that holds is therefore: within 1e-2 of "
        "max(|pyiqa|, 1) of pyiqa's float32 score, or, where a shape straddles a grid step, of pyiqa's "
        "score computed in float64 (tests/metrics/test_stored_pyiqa_scores.py); the float32 difference alone "
        "has no such bound (one step of one of the 36 features' shapes moves the regressor's output). "
        "Seen on a held-out photograph (issue 25; about 1 % flat windows, not in this repository): 0.026 "
        "from pyiqa's float32 score on a score near 1 (2.4 %), the same grid-step effect; so against "
        "pyiqa's float32 score alone, expect differences of that size (about 0.025) on scores near 1."
    ),
}


# What the original MATLAB code computes in a flat window (read from the releases and MATLAB's
# filter2.m / imfilter.m; issue 12).
_MATLAB_FLAT = {
    "brisque": ("`brisque_feature.m` filters with `filter2`, which finds the Gaussian window to be rank 1 "
                "(an SVD) and runs `conv2` on the two SVD factors: a flat window's local mean then differs "
                "from the pixel by a leftover set by the factors' last bits (LAPACK's), of either sign."),
    "niqe": ("`computequality.m` filters with `imfilter(..., 'replicate')` on doubles. MATLAB's imfilter "
             "splits a rank-1 kernel into two 1-D passes only above a size threshold that has changed between "
             "versions (150 elements for doubles in its `getSeparableFilterThreshold` of 2014; the 7x7 window "
             "has 49), so the release's own leftovers depend on the MATLAB version it runs on."),
    "ilniqe": ("the release filters with `imfilter` (5x5 MSCN window, 2-D on doubles) and `conv2` (the "
               "Gaussian derivatives): their leftovers on flat windows are MATLAB's own summation order. "
               "The spreads below perturb the MSCN leftovers only, not the derivatives': a lower bound."),
    "pi": "PI's NIQE half has NIQE's behaviour (see the NIQE card); its NRQM half has no MSCN step.",
}


def flat_output(spec: MetricSpec) -> str:
    if not spec.native:
        return ""
    return ("- **flat_share** (`list[float]`, native backend): per image, the share of windows that are flat "
            "or exact ramps, where the score depends on rounding (see **Flat areas** below).\n")


def _flat_results() -> dict:
    return json.loads((NATIVE_DATA / "flat_regime.json").read_text()).get("metrics", {})


def flat_regime_section(spec: MetricSpec) -> str:
    """The card's paragraph on flat areas (issue 12), with the numbers of bench/metrics/flat_regime.py."""
    if not spec.native:
        return ""
    from banana100.metrics.native import FLAT_WARN_SHARE

    n = spec.name
    threshold = FLAT_WARN_SHARE.get(n)
    warn = (f"above {threshold:.2%} a `banana100.metrics.native.FlatRegionWarning` is raised" if threshold is not None
            else "no warning is raised (see below)")
    text = (f"""#### Flat areas (clipped skies, flat graphics, exact ramps)

In a flat window (and on an exact ramp) the local mean equals the pixel, so the MSCN coefficient
(the normalised pixel the statistics are fitted to) is a rounding leftover: exactly 0 or a few
units in the last place, of either sign, and the fits count signs. The score then depends on the
arithmetic, not on the image. `compute()` returns `flat_share`, each image's share of such
windows (the Parquet files of `banana100 score` have a `flat_share` column); {warn}.

""")
    if n not in ("piqe", "nrqm"):
        text += """- **mode="pyiqa"** (default): in those windows the native code recomputes the coefficients with
  pyiqa's own convolution arithmetic, so scores match pyiqa on the same device (flat patches at
  every grey level 0-255, skimage's synthetic images, clipped photos: tests/metrics/native/test_native_flat.py;
  on CPU; the CUDA check, bench/gpu/gpu_flat_check.py, has not run on a GPU yet). pyiqa's own score
  there can depend on its convolution backend (oneDNN on or off, cuDNN, TF32).
"""
    r = _flat_results().get(n)
    if n in _MATLAB_FLAT or (r and "rows" in r):
        text += f"- **mode=\"official\"**: {_MATLAB_FLAT.get(n, '')}"
    if r and "rows" in r:
        rows = sorted(r["rows"], key=lambda row: row["leftover_share"])
        from banana100.metrics.native import safe_flat_share

        # the largest spread at each flat share of the photo-with-a-sky series (three grey levels)
        series: dict[str, tuple[float, float]] = {}
        for row in rows:
            if row["image"].startswith("coffee, top"):
                key = row["image"].split(" at ")[0]
                share, spread = series.get(key, (0.0, 0.0))
                series[key] = (max(share, row["leftover_share"]), max(spread, row["official_spread"]))
        worst = max(rows, key=lambda row: row["official_spread"])
        examples = "; ".join(f"{share:.1%} flat: up to {spread:.1%}" for share, spread in sorted(series.values()))
        backend = max(rows, key=lambda row: row["pyiqa_backend_spread"])
        text += (f" Those leftovers cannot be reproduced without MATLAB. How far the official score can move "
                 f"with them (`bench/metrics/flat_regime.py`: every leftover set to 0, to +1e-12 or to -1e-12, the spread "
                 f"of the scores over max(|score|, 1)): {examples}; at most {worst['official_spread']:.0%} "
                 f"({worst['image']}). The 0.5 % the official mode aims at held up to {safe_flat_share(rows):.2%} flat windows "
                 "in those images. "
                 + (f"pyiqa's own score moved by up to {backend['pyiqa_backend_spread']:.0%} between oneDNN on "
                    f"and off ({backend['image']}).\n" if backend["pyiqa_backend_spread"] > 1e-6 else
                    "pyiqa's own score did not move between oneDNN on and off (it filters in float64 there).\n"))
    elif n in _MATLAB_FLAT:
        text += "\n"
    if n == "piqe":
        text += ("- PIQE is not sensitive to it: its block criteria are thresholds at 0.1 on variances and "
                 "deviations, far above rounding leftovers; native and pyiqa agree to 1e-7 on all the flat "
                 "images above, in both modes the share is reported but no warning is raised.\n")
    if n in ("nrqm", "pi"):
        text += ("- NRQM's features (block DCT, steerable-pyramid GSM, singular values of 5x5 patches) equal "
                 "pyiqa's on the flat images above (`bench/metrics/nrqm_flat_features.py`; flat blocks' singular values "
                 "differ only at rounding level); the final score could not be compared here (no "
                 "`NRQM_model.mat`).\n")
    return text + "\n"


def agreement_section(spec: MetricSpec) -> str:
    r = _native_agreement_results().get(spec.name) if spec.native else None
    if not r or "skipped" in r:
        if spec.native:
            why = r["skipped"] if r else "not measured yet"
            return (f"Native backend: not measured against pyiqa on the final score ({why}; run "
                    "`python -m bench.metrics.native_agreement` where the files exist).")
        return ("Scores equal pyiqa's; see pyiqa's calibration tables for its agreement with the original code. "
                "Not re-checked here: the checkpoint cannot be downloaded on the machines this toolkit is built on "
                "(tests marked `needs_weights` compare with pyiqa wherever the files exist).")
    pm = r["pyiqa_mode"]
    rows = "\n".join(
        f"| {p['image']} | {p['value']:.4f} ({p['source']}) | {p['official']:.4f} ({100 * p['official_dev']:+.3f} %) "
        f"| {p['pyiqa']:.4f} ({100 * p['pyiqa_dev']:+.2f} %) |" for p in r["official_mode"])
    return f"""Measured by `python -m bench.metrics.native_agreement` (raw numbers: `banana100/metrics/native/agreement.json`).

- **mode="pyiqa"** (default): largest relative difference from pyiqa {PYIQA_VERSION}'s score
  {pm['max_rel_diff']:.1e} over {pm['images']} images (the reference images below, a simulated
  chain, odd sizes, grayscale, flat areas, the minimum size; worst: {pm['worst_image']}).
  Relative difference: |native - pyiqa| / max(|pyiqa|, 1). {_NATIVE_NOTES.get(spec.name, "")}
- **mode="official"** against the original implementation's published scores:

| image | original (source) | mode="official" | pyiqa {PYIQA_VERSION} |
| --- | --- | --- | --- |
{rows}"""
