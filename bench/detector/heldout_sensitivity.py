"""How far the bare edit_damage score's held-out AUC moves when one of its constants or terms changes.

    nice python -m bench.detector.heldout_sensitivity [--out bench/results/detector/heldout_sensitivity.json]

The held-out chains of bench/detector/validate_edit_damage.py (d) (damage model B, the four DRAWS, 28 chains
each) are measured once; the bare score is then recomputed from their components with one change at a
time (edit_damage.combine's arguments), and the clean-vs-step-10 ROC AUC is reported per draw, pooled
over the 112 chains, and on the photographs alone, with how many chains score step 10 at or below
their clean step 0; and on the validator's fifth draw (part `fresh`, other photographs, when installed)
per source group, kept apart from the pooled figure; and on its sixth draw (part `sixth`) the same way.

Nothing is chosen here: the shipped constants are the fit's (bench/detector/fit_edit_damage.py). This asks how
far the bare score's held-out AUC is a matter of each weight, scores the setting before the evenness refit
and the refit without the fit's photographs on the same chains (SEVERAL), and reports the in-fit figures
of each change beside it when a fit cache (`--fit-cache`, as written by fit_edit_damage.py --cache) is
given.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import REPO, command_line, write_results
from bench.detector.validate_edit_damage import DRAWS, PHOTOGRAPH_PARTS, auc, heldout_chains, missing_distribution_packages

from banana100.metrics.detector import model as ed
from banana100.metrics.detector import relative as rel

INF = math.inf
SHIPPED = {"floor": ed.GRAIN_ABS, "ratio": ed.GRAIN_RATIO, "units": ed.BARE_UNITS, "even": True}


def _units(**changed) -> dict:
    return {**ed.BARE_UNITS, **changed}


# settings that move more than one thing: the shipped one before the evenness refit, and what the fit's rule
# chose with evenness but without the 12 MATE photographs among its sources
# (bench/results/detector/fit_edit_damage_without_photographs.json)
BEFORE = "before the evenness refit (cap 6, floor unit 1.5, cast unit 8, no evenness)"
WITHOUT_PHOTOGRAPHS = "refit without the photographs (cap 6, cast unit 4)"
# the shipped setting of today's version before the signatures of issue 42 (their four terms absent)
BEFORE_SIGNATURES = "before the signatures (no crease, speckles, simplification or blocking term)"
# name -> how many things it moves (the earlier settings had no signature terms: 4 more)
SEVERAL = {BEFORE: 8, WITHOUT_PHOTOGRAPHS: 6, BEFORE_SIGNATURES: 4}
NO_SIGNATURES = {t: (0.0, INF) for t in ed.SIGNATURE_TERMS}

# name -> combine()'s arguments; one change from the shipped setting each (SEVERAL: theirs)
CHANGES = {
    "shipped": SHIPPED,
    BEFORE: {**SHIPPED, "floor": (6.0, 1.5), "units": _units(colour_cast=(0.0, 8.0), **NO_SIGNATURES), "even": False},
    WITHOUT_PHOTOGRAPHS: {**SHIPPED, "floor": (6.0, 1.0), "units": _units(colour_cast=(0.0, 4.0), **NO_SIGNATURES)},
    "no evenness": {**SHIPPED, "even": False},
    "no ratio term (the capped floor alone)": {**SHIPPED, "ratio": (ed.GRAIN_RATIO[0], INF)},
    "no cap on the floor": {**SHIPPED, "floor": (INF, ed.GRAIN_ABS[1])},
    "grain cap 6": {**SHIPPED, "floor": (6.0, ed.GRAIN_ABS[1])},
    "cast unit 8": {**SHIPPED, "units": _units(colour_cast=(0.0, 8.0))},
    "cast unit 32": {**SHIPPED, "units": _units(colour_cast=(0.0, 32.0))},
    "no cast term": {**SHIPPED, "units": _units(colour_cast=(0.0, INF))},
    "no lattice term": {**SHIPPED, "units": _units(lattice=(0.05, INF))},
    "softness from 0.25": {**SHIPPED, "units": _units(softness=(0.25, 0.1))},
    "softness from 0.35": {**SHIPPED, "units": _units(softness=(0.35, 0.1))},
    BEFORE_SIGNATURES: {**SHIPPED, "units": _units(**NO_SIGNATURES)},
    **{f"no {t} term": {**SHIPPED, "units": _units(**{t: (0.0, INF)})} for t in ed.SIGNATURE_TERMS},
    # version 4's refit moved simplification's offset from 0.5 to -0.5 (its component reads lower since the fine
    # band is looked for beside a tile too)
    "simplification from 0.5 (version 3's offset)": {**SHIPPED, "units": _units(simplification=(0.5, 0.5))},
}


def heldout_components(side: int = 384, steps: int = 20) -> dict:
    """{draw: {chain: {"group": ..., "stats": {step: components}}}} of the held-out chains (the validator's
    heldout_chains, its defaults: 20 steps, drawn sources of 384 px)."""
    model = rel.StatsModel("cpu")
    out = {}
    for draw, seeds in DRAWS.items():
        chains, group_of = heldout_chains(steps, side, *seeds, model=model)
        out[draw] = {c: {"group": group_of[c], "stats": st} for c, st in chains.items()}
        print(f"{draw}: {len(chains)} chains measured", flush=True)
    return out


# this file's key -> the validator's part on distribution photographs (PHOTOGRAPH_PARTS)
DISTRIBUTION_DRAWS = {"fifth_draw": "fresh", "sixth_draw": "sixth"}


def fresh_components(draw: str = "fifth_draw", side: int = 384, steps: int = 20) -> dict | None:
    """One of the validator's draws on distribution photographs (DISTRIBUTION_DRAWS: its parts `fresh` and
    `sixth`), measured like heldout_components' draws; None when its photographs are not installed (said)."""
    _, seeds, packages, sources = PHOTOGRAPH_PARTS[DISTRIBUTION_DRAWS[draw]]
    if missing := missing_distribution_packages(*packages):
        print(f"the {draw.replace('_', ' ')}'s photographs are not installed (apt-get install {' '.join(missing)}): "
              "it is left out", flush=True)
        return None  # main keeps the figures the results file already holds
    chains, group_of = heldout_chains(steps, side, *seeds, sources=sources)
    print(f"{draw.replace('_', ' ')}: {len(chains)} chains measured", flush=True)
    return {c: {"group": group_of[c], "stats": st} for c, st in chains.items()}


def fresh_figures(chains: dict, change: dict) -> dict:
    """The clean-vs-step-10 ROC AUC on a draw of DISTRIBUTION_DRAWS: every chain, and each source group."""
    out = {}
    for group in ["all", *dict.fromkeys(c["group"] for c in chains.values())]:
        sub = [c for c in chains.values() if group == "all" or c["group"] == group]
        out[group] = round(auc(list(_score([c["stats"][0] for c in sub], change)),
                               list(_score([c["stats"][10] for c in sub], change))), 3)
    return out


def _score(stats: list[dict], change: dict) -> np.ndarray:
    comp = {c: torch.tensor([s[c] for s in stats], dtype=torch.float64) for c in ed.COMPONENTS}
    return ed.combine(comp, **change).numpy()


def figures(chains_by_draw: dict, change: dict) -> dict:
    per_draw, photos, clean_all, damaged_all, falls = {}, {}, [], [], 0
    for draw, chains in chains_by_draw.items():
        clean = _score([c["stats"][0] for c in chains.values()], change)
        damaged = _score([c["stats"][10] for c in chains.values()], change)
        is_photo = np.array([c["group"] != "generated" for c in chains.values()])
        per_draw[draw] = round(auc(list(clean), list(damaged)), 3)
        photos[draw] = round(auc(list(clean[is_photo]), list(damaged[is_photo])), 3)
        clean_all += list(clean)
        damaged_all += list(damaged)
        falls += int(np.sum(damaged <= clean))
    return {"auc_by_draw": per_draw, "auc_pooled": round(auc(clean_all, damaged_all), 4),
            "auc_photographs_by_draw": photos, "chains_step10_at_or_below_clean": falls,
            "n_chains": len(clean_all)}


def in_fit(cache: dict, change: dict) -> dict:
    """The fit's figures (share of ordered pairs, ROC AUC) of a change, on fit_edit_damage.py's cached data."""
    from bench.detector import fit_edit_damage as fit

    score = _score(cache["stats"], change)
    y = np.array(cache["labels"])
    pairs = fit.pairs_of(cache["labels"], cache["group"], cache["kind"])
    return {"pair_share": round(fit.pair_share(score, pairs), 3),
            "auc": round(auc(list(score[y == 0]), list(score[y == 1])), 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "bench/results/detector/heldout_sensitivity.json"))
    ap.add_argument("--fit-cache", help="fit_edit_damage.py's --cache file: also report each change in-fit")
    args = ap.parse_args(argv)
    from bench.detector import fit_edit_damage as fit

    if args.fit_cache:
        fit.read_cache(args.fit_cache, ap.error)  # a stale cache stops the run before the chains are measured
    chains = heldout_components()
    fresh = {d: fresh_components(d) for d in DISTRIBUTION_DRAWS}
    cache = fit.read_cache(args.fit_cache, ap.error) if args.fit_cache else None
    # without a draw's photographs, its recorded figures are kept, not dropped
    out = Path(args.out)
    recorded = json.loads(out.read_text()).get("changes", {}) if out.is_file() else {}
    results = {}
    for name, change in CHANGES.items():
        results[name] = figures(chains, change)
        if cache is not None:
            results[name]["in_fit"] = in_fit(cache, change)
        for d, measured in fresh.items():
            if measured is not None:
                results[name][d] = fresh_figures(measured, change)
            elif d in recorded.get(name, {}):
                results[name][d] = recorded[name][d]
        r = results[name]
        print(f"{name}: pooled {r['auc_pooled']:.3f}, by draw {list(r['auc_by_draw'].values())}, photographs "
              f"{list(r['auc_photographs_by_draw'].values())}, step 10 <= clean in {r['chains_step10_at_or_below_clean']} "
              f"of {r['n_chains']}" + (f"; in-fit {r['in_fit']}" if cache is not None else "")
              + "".join(f"; {d.replace('_', ' ')} {r[d]}" for d in fresh if fresh[d] is not None), flush=True)
    command = command_line("bench.detector.heldout_sensitivity", argv or sys.argv[1:], {args.fit_cache: "FIT.json"})
    write_results(args.out, {"command": command,
                             "draws": {d: list(s) for d, s in DRAWS.items()}, "changes": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
