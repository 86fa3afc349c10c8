"""The metric card of the edit_damage detector (`metrics/edit_damage/README.md`).

Written by `python -m banana100.metrics.cards` like every card, but from its own template: the
detector is ours, not pyiqa's, and its card is mostly what it was validated on. The figures come
from banana100/metrics/native/edit_damage_validation.json and banana100/metrics/native/edit_damage_cost.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from banana100 import about
from banana100.extras import requirement
from banana100.metrics.native import edit_damage as ed
from banana100.metrics.table import MetricSpec

# package data, so that the wheel and a clone write the same card (bench/ writes them)
NATIVE_DATA = Path(__file__).with_name("native")


def _results(name: str) -> dict:
    path = NATIVE_DATA / name
    return json.loads(path.read_text()) if path.is_file() else {}


def _header(spec: MetricSpec) -> str:
    meta = {
        "title": spec.display_name,
        "emoji": "\U0001f34c",
        "tags": ["evaluate", "metric", "image-quality-assessment", "no-reference"],
        "description": "A cheap reference-free detector of recursive-edit damage (grain, lattice, colour cast, "
                       "softness); higher is more damage. Part of the Banana100 toolkit.",
        "sdk": "gradio",
        "app_file": "app.py",
        "pinned": False,
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000) + "---\n"


def _units() -> str:
    rows = []
    why = {
        "grain": "8-bit levels; white noise of s levels on a flat area reads s",
        "lattice": "correlation (0-1), peak over the half lag",
        "colour_cast": "8-bit levels of Cb/Cr",
        "softness": "Crete's blur effect, 0 sharp to 1 blurred",
    }
    for c in ed.COMPONENTS:
        off, unit = ed.UNITS[c]
        term = f"max(0, {c} - {off:g}) / {unit:g}" if off else f"{c} / {unit:g}"
        rows.append(f"| `{c}` | {why[c]} | {term} |")
    return "| component | unit | term added to the score |\n| --- | --- | --- |\n" + "\n".join(rows)


def _ladders(r: dict) -> str:
    lad = r.get("ladders")
    if not lad:
        return "Not measured yet: run `python bench/validate_edit_damage.py --part ladders`."
    n = len(next(iter(lad.values()))["images"])
    lines = [f"On {n} photographs (skimage.data's, and the reference images in `../shared/reference-images` "
             f"when present), each degraded at known strengths:", "",
             "| ladder | strengths | mean Spearman rho (score vs strength) | monotone | last step above clean |",
             "| --- | --- | --- | --- | --- |"]
    for name, v in lad.items():
        lines.append(f"| {name} | {', '.join(str(s) for s in v['strengths'])} ({v['unit']}) | {v['mean_rho']:.2f} | "
                     f"{v['share_monotone']:.0%} | {v['share_rises']:.0%} |")
    return "\n".join(lines)


def _clean(r: dict) -> str:
    c = r.get("clean_vs_step5")
    if not c:
        return "Not measured yet: run `python bench/validate_edit_damage.py --part clean`."
    lines = ["| clean content | images | min | median | max |", "| --- | --- | --- | --- | --- |"]
    for kind, v in c["per_kind"].items():
        lines.append(f"| {kind} | {v['n']} | {v['min']:.2f} | {v['median']:.2f} | {v['max']:.2f} |")
    lines += ["", "| step-5 stand-in (added to every clean image) | median score | ROC AUC vs clean | "
              + " | ".join(f"AUC of `{k}` alone" for k in ed.COMPONENTS) + " |",
              "| --- | --- | --- | " + " | ".join("---" for _ in ed.COMPONENTS) + " |"]
    for d, v in c["damaged"].items():
        lines.append(f"| {d} | {v['median']:.2f} | {v['auc']:.3f} | "
                     + " | ".join(f"{v['auc_components'][k]:.3f}" for k in ed.COMPONENTS) + " |")
    lines += ["", f"Pooled over the four: **ROC AUC {c['pooled_auc']:.3f}** (clean against damaged, across images). "
              f"Clean images scoring above the median damaged image ({c['damaged_median']:.2f}): "
              f"{', '.join(c['clean_above_damaged_median']) or 'none'}."]
    return "\n".join(lines)


def _protocol(r: dict) -> str:
    p = r.get("simulated_protocol")
    if not p:
        return "Not measured yet: run `python bench/validate_edit_damage.py --part protocol`."
    a = r.get("simulated_protocol_args", {})
    lines = [f"{a.get('steps', '?')}-step chains of the simulated editor from {', '.join(a.get('sources', []))} "
             f"({a.get('side', '?')} px), one per source and setting; the paper's protocol (steps 1 -> 5, 10, 20):", "",
             "| setting | chains | failed | failure rate | mean rho |", "| --- | --- | --- | --- | --- |"]
    for s, v in p.items():
        rho = "n/a" if v["mean_rho"] is None else f"{v['mean_rho']:.2f}"
        lines.append(f"| {s} | {v['n_chains']} | {v['n_failed']} | {v['failure_rate']:.0%} | {rho} |")
    return "\n".join(lines)


def _cost() -> str:
    r = _results("edit_damage_cost.json")
    if not r:
        return "Not measured yet: run `python bench/bench_edit_damage.py`."
    lines = ["| size | batch | edit_damage / NIQE (wall) | edit_damage / NIQE (CPU time) |", "| --- | --- | --- | --- |"]
    for row in r["rows"]:
        lines.append(f"| {row['size']} px | {row['batch']} | {row['ratio_wall']:.2f} | {row['ratio_cpu']:.2f} |")
    env = r["environment"]
    return (f"Measured by `{r['command']}` on {env['device']} ({env['cpus']} cores, {env['threads']} torch threads, "
            "a machine shared with other jobs: ratios, not seconds):\n\n" + "\n".join(lines))


def render(spec: MetricSpec) -> str:
    r = _results("edit_damage_validation.json")
    n = spec.name
    return f"""{_header(spec)}
# Metric Card for {spec.display_name}

## Metric Description

None of the 21 NR-IQA metrics of the Banana100 paper sees what recursive editing does to an
image; the evaluators that do (VisualQuality-R1, a 7B vision-language judge) are far too costly
to filter millions of images. `{n}` is a cheap, reference-free score for that damage, built from
four interpretable components, each from a published definition or a degradation we can state,
summed into one score: **higher means more damage** (`lower_better: True`, like the other
"badness" scores). `compute(..., components=True)` returns every component per image, so a user
can see why an image scored high.

- **grain**: the noise floor, band-pass (difference of Gaussians, sigma 0.5 and 2.5 px) energy of
  the luma in the flattest 10 % of 16x16 tiles, in white-noise-equivalent 8-bit levels. Unlike
  the classical white-noise estimators (wavelet MAD, Immerkaer, PCA), a band-pass also sees
  spatially correlated grain (the static noise Nano Banana Pro chains gain).
- **lattice**: a periodic pattern in the high-pass residual, after Mi-Ripple / MIRAGE (arXiv
  2609.11317): the normalised autocorrelation of the residual (luma minus its sigma-2 blur) on
  the flatter half of the tiles, clipped at 3 standard deviations, at lags of 3 to 32 px; the
  score is the largest peak over the autocorrelation at half that lag (a period peaks there, a
  smooth fall-off from blur or correlated grain, or a ridge along an edge, does not).
- **colour_cast**: how far the greys sit off neutral: the mean chroma (BT.601 Cb, Cr) of the
  near-neutral, unclipped pixels (the green tint of Nano Banana Pro chains moves them all one way).
- **softness**: Crete et al.'s blur effect (SPIE 2007) on the strongest 5 % of edges.

{_units()}

The constants were fixed from these stated reasons before any validation; nothing was fitted to
the simulated editor's chains (which are ours: passing on them would prove little) or to the
validation below. The code: `banana100/metrics/native/edit_damage.py`.

- **Direction:** lower is better (0 = no damage found).
- **Nominal range:** 0 and up (no fixed upper bound).
- **Family:** detector (this toolkit's own; not a pyiqa metric, no `pyiqa` backend).

## How to Use

```python
import evaluate

{n} = evaluate.load("metrics/{n}")  # the folder holding {n}.py and this card
out = {n}.compute(images=["a.png", "b.jpg"], components=True)
# {{"metric": "{n}", "scores": [...], "mean": ..., "lower_better": True,
#   "components": {{"grain": [...], "lattice": [...], "colour_cast": [...], "softness": [...]}}}}
```

The install line: `pip install "{requirement()}"` (the core library; no pyiqa, no files).
From the command line: `banana100 score RUN_OR_DATASET --metrics edit_damage` like any metric.

### Inputs

- **images** (`list`): file paths, PIL images, or HxWx3 `uint8` arrays (RGB as pyiqa reads a file).
- **device** (`str`, optional): `"cpu"`, `"cuda"`, `"cuda:1"`, ...; default `cuda` when available.
- **batch_size** (`int`, optional, default 8): the most same-size images per forward pass; every
  statistic is per image, so a score does not depend on its batch (tested).
- **components** (`bool`, optional): also return each component per image.
- **max_image_pixels** (`int`, optional): the largest width x height read from a file.

**Minimum size:** {spec.min_size}x{spec.min_size} pixels. {spec.min_size_note} A smaller image raises
`ImageTooSmallError` naming it, before anything is scored. A file that cannot be read raises
`ImageReadError` naming it, after the others are scored (`error.scores`).

**Uniform images:** {spec.uniform_note}

### Output Values

- **metric** (`str`): `"{n}"`; **scores** (`list[float]`); **mean** (`float`); **lower_better**: `True`.
- **components** (with `components=True`): `{{name: [value per image]}}` for {", ".join(f"`{c}`" for c in ed.COMPONENTS)}.

## Validation

Everything below is written by `python bench/validate_edit_damage.py` (all three parts;
`banana100/metrics/native/edit_damage_validation.json`). **Validated on:** synthetic degradations of known
strength on public photographs, and clean images of every kind. **Not validated on:** real Nano
Banana (or any real editor's) chains: none were reachable from the build machine.

### (a) Ladders of known strength

{_ladders(r)}

### (b) Clean content against a stand-in for the step-5 effect

A filter must judge one image without its chain, so the question is how far clean images spread
against the damage. Our stand-in for the step-5 effect (people see the noise by steps 5-10): white
noise of 3 levels, correlated grain of 3 levels, a period-8 lattice of 2 levels, a green gain of
1.04, each added to every clean image below (our choice of "about visible", not measured on real
chains).

{_clean(r)}

### (c) The protocol on the simulated editor's chains (reported, not optimised)

{_protocol(r)}

### The first external check: Mi-Ripple / MIRAGE

Mi-Ripple / MIRAGE (arXiv 2609.11317, MIT) measured on the release's `more_models` supplement: the
autocorrelation peak of the high-pass residual rises from 0.07 to 0.25 over ten Nano Banana Pro
steps (Spearman rho 0.99), up to 0.17 -> 0.87 for Grok Imagine, about 0.05 on the source
photograph; its spectral-anomaly median is 1.73 on photographs and 4.17 on Gemini output. Our
`lattice` is a variant of their peak (flatter tiles only, peak over the half lag), so its values
are comparable in kind, not equal. When the release or the supplement is reachable, the protocol
on it is one command (see `docs/edit-damage.md`):

```bash
banana100 score kenantang/Banana100 --metrics edit_damage --out scores.parquet && banana100 report scores.parquet
```

## Cost

At most the cost of native NIQE per image was the target:

{_cost()}

## Limitations and Bias

- It will miss damage that is not noise, lattice, colour cast or softness: simplified texture
  (Qwen), duplicated or changed objects, creases along contours (Nano Banana 2 Fast) unless they
  soften the strongest edges, and anything semantic.
- Clean content spreads: dense natural texture (grass, gravel) reads as grain, natural periodic
  content (water ripples, brick, fabric) as lattice, warm or cool near-greys (a sunset, tungsten
  light) as colour cast, and shallow depth of field as softness (the table in (b) says how far).
  Compare an image with its chain's earlier steps where you can; as a one-image filter, pick the
  threshold on clean content like yours.
- The units (2 levels of grain, 0.2 of lattice, 2 levels of cast, 0.1 of softness) are stated
  round figures, not fitted; a different weighting changes which images rank first.
- JPEG: compression removes grain and colour detail faster than it adds a visible lattice, so a
  JPEG ladder does not rise reliably (row "jpeg" in (a)).

## Licences

- Module code (`banana100`): {about.CODE_LICENCE}. No parameter files; no pyiqa.

## Citation

```bibtex
{spec.citation}
```

## Further References

- Banana100: https://arxiv.org/abs/2604.03400
- Mi-Ripple / MIRAGE: https://arxiv.org/abs/2609.11317
- Crete F., Dolmiere T., Ladret P., Nicolas M., The blur effect: perception and estimation with a new
  no-reference perceptual blur metric, SPIE Human Vision and Electronic Imaging 2007.
- Buchsbaum G., A spatial processor model for object colour perception, J. Franklin Inst. 1980.
"""
