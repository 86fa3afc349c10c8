"""The metric card of the edit_damage detector (`metrics/edit_damage/README.md`).

Written by `python -m banana100.metrics.hub.cards` like every card, from its own template: the detector is
ours, not pyiqa's, and its card is mostly what it was validated on. Every figure comes from the data files
(`evidence`); the rationale is docs/edit-damage.md's, which the card points to rather than repeats.
"""

from __future__ import annotations

import yaml

from banana100 import about
from banana100.extras import requirement
from banana100.metrics.detector import model as ed
from banana100.metrics.detector.evidence import (COST, FILTER_AUC, FIT_PHOTOGRAPHS_PACKAGE, HELDOUT_DRAWS,
                                                 OUTSIDE_RENDERS, SIGNATURE_DRAWS, clean_sources_above,
                                                 held_out_signature_draws, heldout_aucs,
                                                 heldout_aucs_text, heldout_by_source, other_metrics,
                                                 other_metrics_model_b, others_pooled, results, signature_draw_of,
                                                 signatures)
from banana100.metrics.table import MetricSpec, get_metric

DOCS = "docs/edit-damage.md"
RECORD = "docs/edit-damage-history.md"  # what changed, was drawn and was tried, version by version


def _header(spec: MetricSpec) -> str:
    meta = {
        "title": spec.display_name,
        "emoji": "\U0001f34c",
        "tags": ["evaluate", "metric", "image-quality-assessment", "no-reference"],
        "description": "A cheap reference-free detector of recursive-edit damage (grain, lattice, colour cast, "
                       "softness, creases, speckles, simplified texture, JPEG blocking); higher is more damage. "
                       "Part of the Banana100 toolkit.",
        "sdk": "gradio",
        "app_file": "app.py",
        "pinned": False,
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000) + "---\n"


def _term(c: str) -> str:
    """The term a component adds to the bare score, as a formula."""
    if c == "grain":
        (off, unit), f, (cap, unit_a) = ed.GRAIN_RATIO, ed.GRAIN_RATIO_FLOOR, ed.GRAIN_ABS
        return (f"(min(grain, {cap:g}) / {unit_a:g} + max(0, (noise + {f:g}) / (texture + {f:g}) - {off:g}) / "
                f"{unit:g}) x evenness (fitted), noise = grain x sqrt(1 - lattice): the floor's share that does not "
                "repeat")
    if c not in ed.TERMS:
        if c in ("texture", "evenness"):
            return "none: it weighs grain's term"
        return "none: `edit_damage_rel`'s " + next(t for t, read in ed.REL_COMPONENT.items() if read == c)
    off, unit = ed.BARE_UNITS[c]
    term = (f"max(0, {c} {'-' if off > 0 else '+'} {abs(off):g}) / {unit:g}" if off else f"{c} / {unit:g}")
    fitted = c in ed.SIGNATURE_TERMS or c == "softness" or unit != ed.UNITS[c][1]
    return term + (" (fitted)" if fitted else "")


def _units() -> str:
    rows = [f"| `{c}` | {ed.COMPONENT_UNITS[c]} | {_term(c)} |" for c in ed.COMPONENTS]
    rows += [f"| `{c}` | {unit} | none: measured for `edit_damage_rel` only |" for c, unit in ed.REL_ONLY_UNITS.items()]
    return "| component | unit | term added to the bare score |\n| --- | --- | --- |\n" + "\n".join(rows)


def _description(spec: MetricSpec) -> str:
    n = spec.name
    return f"""None of the 21 NR-IQA metrics of the Banana100 paper sees what recursive editing does to an
image. `{n}` is a cheap, reference-free score for that damage: interpretable components, one per
editor's signature the paper names, each in a physical unit, summed into one score: **higher means
more damage** (`lower_better: True`). `compute(..., components=True)` returns every component per image;
`banana100 score` writes them to its scores file and prints each score's terms under its table. What
each component measures and why, what was fitted and how: [{DOCS}](../../{DOCS}).

{_units()}

Given the image an edit started from (a chain's step 0, or any earlier step), `compute(images=...,
references=...)` returns `edit_damage_rel`: the damage *added* since the reference, each component
against the reference's own (grain and the lattice's amplitude in quadrature, so that a smooth source's
floor and a photograph's count alike; the cast as the move of its vector; the others' rise, the crease
read edge by edge (`crease_edges`, which a line beside a few contours moves); for simplification, the texture
lost since the source; and, its own since version 11, colour edges blurred, `colour_softness`, which each JPEG
save blurs again), over stated units. `banana100 score` adds it for
chains scored with `{n}` (against step 0) and for plain images given `--reference SRC`.

{alone(results())}

- **Direction:** lower is better (0 = no damage found).
- **Nominal range:** 0 and up (no fixed upper bound).
- **Family:** detector (this toolkit's own; not a pyiqa metric, no `pyiqa` backend)."""


def _how_to_use(spec: MetricSpec) -> str:
    n = spec.name
    comps = ", ".join(f"`{c}`" for c in ed.COMPONENTS)
    return f"""```python
import evaluate

{n} = evaluate.load("metrics/{n}")  # the folder holding {n}.py and this card
out = {n}.compute(images=["a.png", "b.jpg"], components=True)
# {{"metric": "{n}", "scores": [...], "mean": ..., "lower_better": True, "components": {{"grain": [...], ...}}}}
out = {n}.compute(images=["step_05.png", "step_10.png"], references="step_00.png")  # edit_damage_rel
```

The install line: `pip install "{requirement()}"` (the core library; no pyiqa, no files).
From the command line: `banana100 score RUN_OR_DATASET --metrics edit_damage` like any metric.

### Inputs

- **images** (`list`): file paths, PIL images, or HxWx3 `uint8` arrays (RGB as pyiqa reads a file).
- **device** (`str`, optional): `"cpu"`, `"cuda"`, `"cuda:1"`, ...; default `cuda` when available.
- **batch_size** (`int`, optional, default 8): the most same-size images per forward pass; every
  statistic is per image, so a score does not depend on its batch (tested).
- **components** (`bool`, optional): also return each component per image.
- **references** (optional): the image each edit started from, one for all or one per image; the
  scores are then `edit_damage_rel` (and the components what each added).
- **max_image_pixels** (`int`, optional): the largest width x height read from a file.

**Minimum size:** {spec.min_size}x{spec.min_size} pixels. {spec.min_size_note} A smaller image raises
`ImageTooSmallError` naming it, before anything is scored. A file that cannot be read raises
`ImageReadError` naming it, after the others are scored (`error.scores`).

**Uniform images:** {spec.uniform_note}

### Output Values

- **metric** (`str`): `"{n}"`; **scores** (`list[float]`); **mean** (`float`); **lower_better**: `True`.
- **components** (with `components=True`): `{{name: [value per image]}}` for {comps}."""


def ladders(r: dict) -> str:
    lad = r.get("ladders")
    if not lad:
        return "Not measured yet: run `python -m bench.detector.validate_edit_damage --part ladders`."
    n = len(next(iter(lad.values()))["images"])
    lines = [f"On {n} photographs (skimage.data's; the reference images in `../shared/reference-images` "
             f"when present, less its distorted copies: pepper_1..4 and TID2013's I03; and the photographs that "
             "ship in installed packages, held out of every fit: `PACKAGE_PHOTOGRAPHS` in the validator), each "
             "degraded at known strengths:", "",
             "| ladder | strengths | mean Spearman rho (score vs strength) | monotone | last step above clean "
             "| mean rho, the reference photographs alone | mean rho (last step above clean), the package photographs alone |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, v in lad.items():
        refs = _mean([row["rho"] for row in v["images"] if row["image"].startswith("ref:")])
        package = [row for row in v["images"] if row["image"].startswith("pkg:")]
        held = (f"{_mean([row['rho'] for row in package]):.2f} ({_mean([row['rises'] for row in package]):.0%})"
                if package else "n/a")
        lines.append(f"| {name} | {', '.join(str(s) for s in v['strengths'])} ({v['unit']}) | {v['mean_rho']:.2f} | "
                     f"{v['share_monotone']:.0%} | {v['share_rises']:.0%} | {'n/a' if refs is None else f'{refs:.2f}'} | "
                     f"{held} |")
    # name the images where damage lowered the score: a wrong answer, not a weak one
    falls = {name: [row["image"] for row in v["images"] if not row["rises"]] for name, v in lad.items()}
    falls = {k: v for k, v in falls.items() if v}
    if falls:
        lines += ["", "The strongest step scores below the clean image on: " + "; ".join(
            f"{k}: {', '.join(v)}" for k, v in falls.items()) + "."
            + (" On a grainy photograph, added correlated grain pulls the fine/coarse ratio toward its own, lower "
               "one faster than the capped floor rises (docs/edit-damage.md); `edit_damage_rel` compares grain "
               "itself and rises there." if "correlated grain" in falls else "")]
    return "\n".join(lines)


def _mean(values: list) -> float | None:
    return sum(values) / len(values) if values else None


def _clean(r: dict) -> str:
    c = r.get("clean_vs_step5")
    if not c:
        return "Not measured yet: run `python -m bench.detector.validate_edit_damage --part clean`."
    lines = ["| clean content | images | min | median | max |", "| --- | --- | --- | --- | --- |"]
    for kind, v in c["per_kind"].items():
        lines.append(f"| {kind} | {v['n']} | {v['min']:.2f} | {v['median']:.2f} | {v['max']:.2f} |")
    lines += ["", "| step-5 stand-in (added to every clean image) | median score | ROC AUC vs clean | "
              + " | ".join(f"AUC of `{k}` alone" for k in ed.TERMS) + " |",
              "| --- | --- | --- | " + " | ".join("---" for _ in ed.TERMS) + " |"]
    for d, v in c["damaged"].items():
        lines.append(f"| {d} | {v['median']:.2f} | {v['auc']:.3f} | "
                     + " | ".join(f"{v['auc_components'][k]:.3f}" for k in ed.TERMS) + " |")
    if c.get("auc_by_kind"):
        lines += ["", "Each kind of content alone (its clean images against the same images with every stand-in): "
                  + "; ".join(f"{k} {v:.3f}" for k, v in c["auc_by_kind"].items()) + "."]
    lines += ["", f"Pooled over the four: **ROC AUC {c['pooled_auc']:.3f}** (clean against damaged, across images). "
              f"Clean images scoring above the median damaged image ({c['damaged_median']:.2f}): "
              f"{', '.join(c['clean_above_damaged_median']) or 'none'}."]
    return "\n".join(lines)


def _interval(b: dict) -> str:
    ci = b.get("auc_clean_vs_step10_ci95")  # over a handful of chains an interval says nothing: left out
    return f" ({ci[0]:.2f}-{ci[1]:.2f})" if ci and b.get("n_chains", 0) >= 10 else ""


def _figures_row(name: str, f: dict) -> str:
    b, r = f["bare"], f["relative"]
    comps = b.get("auc_clean_vs_step10_components", {})
    best = max(comps, key=comps.get) if comps else None
    return (f"| {name} | {b['n_chains']} | {r['n_failed']} | {r['auc_step1_vs_step10']:.3f} | {b['n_failed']} | "
            f"{b['auc_step1_vs_step10']:.3f} | {b['auc_clean_vs_step10']:.3f}{_interval(b)} | "
            + (f"`{best}` {comps[best]:.3f}" if best else "n/a") + " |")


_FIGURES_HEAD = ("| chains | n | `edit_damage_rel` failed | `edit_damage_rel` AUC step 1 vs 10 | bare failed | "
                 "bare AUC step 1 vs 10 | bare AUC clean (step 0) vs step 10 (95 % bootstrap interval over "
                 "chains) | best single component, clean vs 10 |\n"
                 "| --- | --- | --- | --- | --- | --- | --- | --- |")


def _protocol(r: dict) -> str:
    p = r.get("simulated_protocol")
    if not p or "all settings" not in p:
        return "Not measured yet: run `python -m bench.detector.validate_edit_damage --part protocol`."
    a = r.get("simulated_protocol_args", {})
    lines = [f"{a.get('steps', '?')}-step chains of the simulated editor from {', '.join(a.get('sources', []))} "
             f"({a.get('side', '?')} px), one per source and setting; the paper's protocol (steps 1 -> 5, 10, 20) "
             "for the bare score and for `edit_damage_rel` (against step 0). The AUCs are across chains: step 10 "
             "of one chain against step 1 of another, and (bare score) the clean source against a step-10 copy.", "",
             "| setting | chains | `edit_damage_rel` failed | bare failed |", "| --- | --- | --- | --- |"]
    for s, v in p.items():
        if s != "all settings":
            lines.append(f"| {s} | {v['bare']['n_chains']} | {v['relative']['n_failed']} | {v['bare']['n_failed']} |")
    lines += ["", "Over every setting:", "", _FIGURES_HEAD, _figures_row("all settings", p["all settings"]),
              "", "The colour round trip (desaturate, then recolour) moves the cast away from the source's at once and "
              "back when it recolours, so against step 0 a recoloured step can score below step 1: "
              + ", ".join(p["all settings"]["relative"]["failed_chains"] or ["no chain"])
              + " failed that way here. Read such chains against an earlier output (`references=` that step)."]
    return "\n".join(lines)


def heldout(r: dict) -> str:
    h = r.get("heldout_chains")
    if not h:
        return "Not measured yet: run `python -m bench.detector.validate_edit_damage --part heldout`."
    lines = [f"{h.get('steps', 20)}-step chains of a second damage model (`bench/detector/damage_model_b.py`: shifts "
             "and crops, a lattice of period 5-12 px, grain correlated over 0.6-1.2 px, a magenta or blue drift, pasted "
             f"content; no JPEG), one per source ({h.get('side', '?')} px drawn sources; photographs at most 512 px); "
             f"Nano Banana Pro's kind of damage. How each draw was made and how often it was looked at: {RECORD}. "
             "Every table is of today's sources, scored with the shipped detector."]
    for key, title in HELDOUT_DRAWS.items():
        d = r.get(key)
        if not d:
            continue
        seeds = d.get("seeds", {})
        groups = [g for g in d if isinstance(d[g], dict) and "bare" in d[g] and g != "all"]
        lines += ["", f"{title} (chain seeds from {seeds.get('chains', '?')}, drawn sources seed "
                      f"{seeds.get('drawn_sources', '?')}):", "", _FIGURES_HEAD]
        # the fit's photographs are in-fit wherever a draw holds them
        lines += [_figures_row(f"{g} (in the fit)" if g == FIT_PHOTOGRAPHS_PACKAGE else g, d[g]) for g in groups]
        lines.append(_figures_row("**all**", d["all"]))
    return "\n".join(lines + _model_b_beside_other_metrics(r))


def _model_b_beside_other_metrics(r: dict) -> list[str]:
    """One of (d)'s draws scored alone by edit_damage and by the paper's hand-crafted metrics (the validator's part
    `other_metrics_model_b`); [] where not measured."""
    scored = other_metrics_model_b(r)
    if not scored:
        return []
    key, others = scored
    b = r[key]["all"]["bare"]
    cells = [_metric_cell_text(f) for f in others.values()]
    return ["", f"{HELDOUT_DRAWS[key].split(',')[0]} beside the paper's hand-crafted metrics on the same chains (AUC clean vs "
                "step 10, then chains passed; each metric read in its own direction; the validator's part "
                "`other_metrics_model_b`, with the metrics' parameter files):", "",
            *_beside_head("chains", "`edit_damage`", others),
            f"| all {b['n_chains']} | {b['auc_clean_vs_step10']:.2f}, {b['n_chains'] - b['n_failed']}/{b['n_chains']} | "
            + " | ".join(cells) + " |"]


def _beside_head(rows: str, ours: str, metrics) -> list[str]:
    """The head of a table that sets our score beside the hand-crafted `metrics`, one column each."""
    names = [get_metric(m).display_name for m in metrics]
    return [f"| {rows} | {ours} | " + " | ".join(names) + " |", "| --- " * (len(names) + 2) + "|"]


def _metric_cell_text(f: dict) -> str:
    """A hand-crafted metric's cell: "0.41, 8/17", with the chains it could not score where any."""
    return f"{f['auc']:.2f}, {f['passed']}/{f['n']}" + (f" ({f['unscored']} unscored)" if f["unscored"] else "")


# why each signature's chains are missed where they are (the chains missed are listed from the data)
MISSES = {
    "creases": "alone, a halo sharpens the edges it rings on, which lowers the softness term about as far as the "
               "crease rises, and a photograph's own grain or specks (stars) fade under the editor's re-renders "
               "faster than the crease grows; "
               "since version 5 the bare score reads the mean profile across the contours, which a photograph's "
               "texture beside its edges no longer fools, but a faint line beside a few contours is lost in it "
               "(told the source the crease is read edge by edge); a render without contours gets no crease, and "
               "since version 6 the crease of an image with few contours is weighed down (a mean of few profiles is none); "
               "stripes at the window's own scale (about 8 px) can still read as a crease",
    "speckles": "specks on texture (against a busy background: not counted, on purpose), specks under 24 levels "
                "or blurred by later steps, and specks wider than about 3 px (the third draw at 768 px, drawn twice "
                "as coarse: the component alone tells clean from step 10 at 0.69; as drawn, 0.93); since version 7 a "
                "speck beside strong content (anything half as strong 2 px away: a stroke, an edge) is not counted, "
                "told the source too; alone, a photograph's own isolated specks (stars) dilute it",
    "simplified": "alone, a smooth render or a photograph with little fine detail to lose (a night sky, shallow "
                  "focus) reads as simplified already",
    "jpeg": "most blocking and colour blur come with the first save, so step 1 of a low quality outranks step 10 "
            "of a high one (the chains' own damage orders them no better: the column before); a smooth render "
            "re-saved at one quality changes little after it but for a drift of its colours (told the source, "
            "since version 11 colour edges blurred let dense texture pass); alone, a JPEG of a smooth render loses "
            "grain as it gains blocks; a grid a resize moved off 8 px (since version 10 one a crop moved is read)",
}


def signatures_section(r: dict) -> str:
    """The card's (e): the held-out draw of the version shipped in full, then every draw in one table."""
    keys = held_out_signature_draws(r)
    if not keys:
        return "Not measured yet: run `python -m bench.detector.validate_edit_damage --part signatures`."
    key = keys[-1]
    d, s = r[key], signatures(r, key)
    name = signature_draw_of(key).name
    outside = (", and renders made outside this repository (every raster wallpaper of Debian's UKUI desktop and the "
               "dark one of each of GNOME's: 3D, gradient and flat renders and patterns; at most 512 px)"
               if OUTSIDE_RENDERS in d.get("pooled", {}) else "")
    lines = [f"{d['steps']}-step chains of each editor's signature (`bench/detector/signatures.py`, written from the "
             "descriptions, tuned on no image), one per held-out source: drawn generated-looking renders "
             f"({d['side']} px) and photographs (skimage's held-out ones, Debian's Plasma and Ubuntu wallpapers; at "
             f"most 512 px){outside}. Each draw has chains and drawn sources of its own, was made after a version's choices were "
             "fixed, and was scored once then; every figure here is the version shipped's. Its held-out figures are "
             f"the {name} draw's (chain seeds from {d['seeds']['chains']}, drawn sources of seed "
             f"{d['seeds']['drawn_sources']}; `score`'s note quotes them); every draw is in the table after it (the "
             "earlier ones were looked at before a later version was chosen). Duplicated objects (Qwen-Image-Edit) "
             "change the content, not its quality: out of scope.", "",
             "| signature (editor) | chains | bare passed | bare AUC clean vs step 10 | best component alone | "
             "told the source: passed | AUC step 1 vs 10 | the chains' own damage: AUC step 1 vs 10 | what it misses |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for sig, v in s.items():
        best = f"`{v['best'][0]}` {v['best'][1]:.2f}" if v["best"] else "n/a"
        lines.append(f"| {sig} ({v['editor']}) | {v['n']} | {v['bare_passed']}/{v['n']} | {v['bare_auc']:.3f} | {best} | "
                     f"{v['rel_passed']}/{v['n']} | {v['rel_auc']:.3f} | {_own(v)} | {MISSES.get(sig, '')} |")
    missed = [f"{sig}: bare {_failed(d, sig, 'bare')}; told the source {_failed(d, sig, 'relative')}"
              for sig in s if sig != "pooled"]
    marked = any(d[sig].get("no_damage_growth") for sig in s if sig != "pooled")
    lines += _beside_other_metrics(r, key, s)
    lines += ["", "The chains that failed the protocol: " + "; ".join(missed) + "." + (
        " Marked *: the chain's own damage did not grow after step 1 (detector-free: its RMS difference from the "
        "same chain re-rendered without the signature, `damage_rms` in the results, rose by at most a tenth), so "
        "the protocol's premise does not hold for it (creases on a render with no contour: the model adds nothing)."
        if marked else "")]
    lines += false_alarms(r, key, s)
    lines += ["", OWN_DAMAGE]
    lines += ["", "By source group, every signature pooled:", "", _FIGURES_HEAD]
    lines += [_figures_row(g, f) for g, f in d["pooled"].items() if g != "all"]
    return "\n".join(lines + _every_draw(r))


def false_alarms(r: dict, key: str, s: dict) -> list[str]:
    """The clean sources the bare score reads as more damaged than most step 10s (evidence.clean_sources_above)."""
    found, cost = clean_sources_above(r, key)
    if not found or "pooled" not in s:
        return []
    named = ", ".join(f"{src} {x:.1f} ({100 * share:.0f} %)" for src, x, share in found)
    lost = 1 - s["pooled"]["bare_auc"]
    return ["", "Alone, where the AUC goes: the clean sources that score above at least half of the step 10s of "
                f"every signature pooled (the clean score, then the share of step 10s below it): {named}. Together "
                f"they take {cost:.3f} of the {lost:.3f} the pooled AUC clean vs step 10 loses. Their content is what "
                "the damage looks like (a starfield's stars read as specks, a pattern's drawn arcs as creases, a "
                "dithered render or a photograph's film grain as grain: `python -m bench.detector.hard_images "
                "--outside-renders` splits the renders' scores into terms); one image alone cannot tell them from "
                "damage, told the source it can."]


def _beside_other_metrics(r: dict, key: str, s: dict) -> list[str]:
    """The draw's chains scored alone by edit_damage and by the paper's hand-crafted metrics (the validator's part
    `other_metrics`), a row a signature; [] where that part did not score this draw."""
    others = other_metrics(r, key)
    if not others:
        return []
    metrics = list(others["pooled"])
    lines = ["", "Alone beside the paper's hand-crafted metrics on the same chains (each cell AUC clean vs step 10, "
             "then chains passed; each metric read in its own direction, a higher PIQE, NIQE, BRISQUE or IL-NIQE "
             "being worse; the validator's part `other_metrics`, with the metrics' parameter files):", "",
             *_beside_head("signature", "`edit_damage`", metrics)]
    for sig, v in s.items():
        cells = [_metric_cell_text(others[sig][m]) if m in others.get(sig, {}) else "n/a" for m in metrics]
        lines.append(f"| {sig} | {v['bare_auc']:.2f}, {v['bare_passed']}/{v['n']} | " + " | ".join(cells) + " |")
    lines += ["", "Told the source, each metric's change since the chain's source, step 1 vs step 10 across chains (AUC; "
              "its chains passed are those above: subtracting the source's score keeps a chain's order):", "",
              *_beside_head("signature", "`edit_damage_rel`", metrics)]
    for sig, v in s.items():
        told = [f"{others[sig][m]['told_auc']:.2f}" if m in others.get(sig, {}) else "n/a" for m in metrics]
        lines.append(f"| {sig} | {v['rel_auc']:.2f}, {v['rel_passed']}/{v['n']} | " + " | ".join(told) + " |")
    if any(f["unscored"] for by_metric in others.values() for f in by_metric.values()):
        lines += ["", "Unscored: chains with a step the metric gives no score (a nearly uniform image, where its "
                      "statistics are undefined), neither passed nor failed; its AUC is over the chains scored at both "
                      "steps."]
    return lines


# what the own-damage column is, and why the told-the-source AUC is read against it
OWN_DAMAGE = ("The chains' own damage: step 1 against step 10 across chains, ranked by each chain's RMS difference "
              "from the same chain re-rendered without the signature (`damage_rms`) instead of a score. The chains of "
              "one signature differ in strength (JPEG's quality is drawn from 30 to 75): where step 1 of a strong chain "
              "holds more damage in pixels than step 10 of a weak one, no measure of the damage orders them, and the "
              "told-the-source AUC is to be read against this column, not against 1.")


def _own(v: dict) -> str:
    return f"{v['own_auc']:.3f}" if v.get("own_auc") is not None else "n/a"


def _failed(d: dict, sig: str, kind: str) -> str:
    """A signature's chains that failed the protocol (bare or relative), * where its own damage did not grow."""
    if sig == "pooled":  # pooled chains are named signature/chain
        flat = {f"{g}/{c}" for g, v in d.items() if isinstance(v, dict) for c in v.get("no_damage_growth", ())}
    else:
        flat = set(d[sig].get("no_damage_growth", ()))
    return ", ".join(c + ("*" if c in flat else "") for c in d[sig]["all"][kind].get("failed_chains", [])) or "none"


def _every_draw(r: dict) -> list[str]:
    """Every signature draw measured, a row each: per signature the bare AUC (clean vs step 10) and the told-the-source
    one (step 1 vs 10), pooled the chains passed too; then how each was made."""
    rows = [(x, signatures(r, x.key)) for x in SIGNATURE_DRAWS]
    rows = [(x, s) for x, s in rows if s]
    if len(rows) < 2:
        return []
    sigs = [sig for sig in rows[-1][1] if sig != "pooled"]
    head = " | ".join(f"{sig}: bare, told" for sig in sigs)
    lines = ["", "Every draw, scored by the version shipped: ROC AUC alone (clean vs step 10) and told the source "
             "(step 1 vs 10) per signature; pooled, the chains that passed the protocol too.", "",
             f"| draw | {head} | pooled alone: passed, AUC | pooled told the source: passed, AUC |",
             "| --- |" + " --- |" * (len(sigs) + 2)]
    for x, s in rows:
        cells = [f"{s[sig]['bare_auc']:.2f}, {s[sig]['rel_auc']:.2f}" if sig in s else "n/a" for sig in sigs]
        p = s["pooled"]
        lines.append(f"| {x.name} | " + " | ".join(cells) + f" | {p['bare_passed']}/{p['n']}, {p['bare_auc']:.3f} | "
                     f"{p['rel_passed']}/{p['n']}, {p['rel_auc']:.3f} |")
    lines += ["", "How each was made:", ""]
    for x, _ in rows:
        d = r[x.key]
        seeds = f"chain seeds from {d['seeds']['chains']}, drawn sources of seed {d['seeds']['drawn_sources']}"
        lines.append(f"- {x.how.format(seeds=seeds)}.")
    return lines


def cost(r: dict) -> str:
    """The card's Cost section from the cost results (evidence.COST), with whether it is within NIQE's."""
    if not r:
        return "Not measured yet: run `python -m bench.detector.bench_edit_damage`."
    lines = ["| size | batch | edit_damage / NIQE (wall) | edit_damage / NIQE (CPU time) |", "| --- | --- | --- | --- |"]
    for row in r["rows"]:
        lines.append(f"| {row['size']} px | {row['batch']} | {row['ratio_wall']:.2f} | {row['ratio_cpu']:.2f} |")
    env = r["environment"]
    threads = f"{env['threads']} torch thread" + ("s" if env["threads"] != 1 else "")
    over = [row["ratio_cpu"] for row in r["rows"] if row["ratio_cpu"] > 1]
    verdict = (f"Over the target in {len(over)} of {len(r['rows'])} settings, by up to {(max(over) - 1) * 100:.0f} % "
               "of NIQE's time (the ratio depends on the machine: docs/edit-damage.md, Cost)." if over else
               "Within the target in every setting measured.")
    return (f"Measured by `{r['command']}` on {env['device']} ({env['cpus']} cores, {threads}, "
            "a machine shared with other jobs: ratios, not seconds):\n\n" + "\n".join(lines) + "\n\n" + verdict)


def alone(r: dict) -> str:
    """What the bare score is worth alone and against a reference, in the measured figures."""
    h, c = r.get("heldout_chains", {}).get("all"), r.get("clean_vs_step5")
    if not h or not c:
        return ("The bare score separates clean from damaged images only weakly on one image alone (run "
                "`python -m bench.detector.validate_edit_damage` for the figures); use `references=` where you can.")
    held = held_out_signature_draws(r)  # the draw no choice of the version shipped saw (the first before any)
    sig = signatures(r, held[-1]).get("pooled") if held else None
    others = other_metrics(r, held[-1]).get("pooled", {}) if held else {}
    aucs, by_source = heldout_aucs_text(r), heldout_by_source(r)
    every = min(heldout_aucs(r)) >= FILTER_AUC
    verdict = (f"at or above the {FILTER_AUC} a filter needs on every one, though its 95 % intervals reach below it"
               if every else f"not reliably the {FILTER_AUC} a filter needs")
    return (f"**Alone, the bare score is a filter for strong damage, not for faint damage**: clean against damaged "
            f"across images it reaches ROC AUC {c['pooled_auc']:.2f} on the faint step-5 stand-ins of (b) and {aucs} "
            f"(clean source against step 10) on the {len(heldout_aucs(r))} held-out draws of Nano Banana Pro's kind "
            f"of damage (d), {verdict}"
            + (f"; by source, {by_source}" if by_source else "")
            + (f"; on the other editors' signatures (e), held out, {sig['bare_auc']:.2f}, {sig['bare_passed']} of "
               f"{sig['n']} chains passed" if sig else "")
            + (f" (on the same chains the paper's {others_pooled(others)})" if others else "")
            + ". An image's own grain, periodic content, tint, softness, texture or compression still reads as "
            f"damage. Against a reference, `edit_damage_rel` failed {h['relative']['n_failed']} of "
            f"{h['relative']['n_chains']} chains of (d)'s first draw (AUC step 1 vs 10: "
            f"{h['relative']['auc_step1_vs_step10']:.2f})"
            + (f" and {sig['n'] - sig['rel_passed']} of {sig['n']} of (e) ({sig['rel_auc']:.2f})" if sig else "")
            + ". Give the image an edit started from (`references=`, `--reference`) whenever there is one.")


def _validation(r: dict) -> str:
    return f"""Everything below is written by `nice python -m bench.detector.validate_edit_damage`
(`banana100/metrics/detector/data/edit_damage_validation.json`). **Validated on:** synthetic degradations of
known strength on public photographs, clean images of every kind, chains of the simulated editor, held-out
chains of a second damage model, and held-out chains of each other editor's signature. **Not validated on:**
real editors' chains: none were reachable from the build machine.

### (a) Ladders of known strength

{ladders(r)}

### (b) Clean content against a stand-in for the step-5 effect

A filter must judge one image without its chain. The stand-in for the step-5 effect (people see the noise
by steps 5-10): white noise of 3 levels, correlated grain of 3 levels, a period-8 lattice of 2 levels, a green
gain of 1.04, each added to every clean image (our choice of "about visible").

{_clean(r)}

### (c) The protocol on the simulated editor's chains (in-fit)

{_protocol(r)}

### (d) Held out: chains of a second damage model

{heldout(r)}

### (e) Held out: the other editors' signatures

{signatures_section(r)}

### The first external check: Mi-Ripple / MIRAGE

Mi-Ripple / MIRAGE (arXiv 2609.11317, MIT) measured the autocorrelation peak of the high-pass residual rising
from 0.07 to 0.25 over ten Nano Banana Pro steps of the release's `more_models` supplement, about 0.05 on the
source photograph. Our `lattice` is a variant of their peak (flatter tiles only, peak over the half lag),
comparable in kind, not equal. When the release is reachable: `banana100 score kenantang/Banana100 --metrics
edit_damage --out scores.parquet && banana100 report scores.parquet`."""


def _limitations(spec: MetricSpec) -> str:
    return f"""- It misses what is not one of its components: duplicated or changed objects (content, not quality),
  anything semantic, and per signature what (e) names.
- Clean content spreads on one image alone: dense texture reads as grain, periodic content as lattice,
  a scene's light as colour cast, shallow depth of field as softness, a photograph's own sharp detail
  (specular highlights, fine lines) as crease or speckles, a smooth render as simplified, a JPEG as
  blocking. Compare with the chain's source where you can (`references=`); as a one-image filter, pick the
  threshold on clean content like yours. `banana100 score` says so when `{spec.name}` is scored alone.
- `edit_damage_rel` sees only what grows against the reference: an edit that removes grain or sharpens
  adds nothing, and content that differs from the reference's a lot can read as added damage.
- The fitted constants, the stated units and their reasons: {DOCS}; how often the held-out draws were
  looked at, and what was tried and not shipped: {RECORD}."""


def render(spec: MetricSpec) -> str:
    r = results()
    return f"""{_header(spec)}
# Metric Card for {spec.display_name}

## Metric Description

{_description(spec)}

## How to Use

{_how_to_use(spec)}

## Validation

{_validation(r)}

## Cost

At most the cost of native NIQE per image is the target:

{cost(results(COST))}

## Limitations and Bias

{_limitations(spec)}

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
- Wang Z., Bovik A. C., Evans B. L., Blind measurement of blocking artifacts in images, ICIP 2000.
"""
