"""The held-out signature draw (bench/detector/validate_edit_damage.py's part `signatures`) scored by the detector
before issue 42 and now, side by side on the same chains.

    nice python -m bench.detector.signatures_before_after [--out bench/results/detector/signatures_before_after.json]

Before issue 42 (edit_damage version 2) the bare score had no crease, speckles, simplification or blocking term
and edit_damage_rel compared grain linearly and the lattice by its correlation (grain / 2 levels, lattice /
0.2, cast / 2, softness / 0.1). Both are recomputed here from today's components of the same images (version 2
measured the colour cast on every pixel, today on 2x2 means: its cast differs by rounding), so the figures
are each setting's, on one draw. Nothing is chosen here: the draw was scored once for the shipped setting by
the validator; this says what the change bought.
"""

from __future__ import annotations

import argparse
import math
import sys

import torch

from pathlib import Path
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import REPO, write_results
from bench.detector import signatures as sg
from bench.detector.validate_edit_damage import (auc, heldout_chains, missing_distribution_packages, signature_sources,
                                                 SIGNATURE_PACKAGES)

from banana100.metrics.detector import model as ed
from banana100.metrics.detector.evidence import signature_draw
from banana100.metrics.detector import relative as rel
from banana100.protocol import sensitivity

V2_UNITS = {**ed.BARE_UNITS, **{t: (0.0, math.inf) for t in ed.SIGNATURE_TERMS}}


def bare_v2(s: dict) -> float:
    return float(ed.combine({c: torch.tensor([s[c]], dtype=torch.float64) for c in ed.COMPONENTS}, units=V2_UNITS))


def bare_v3(s: dict) -> float:
    return float(ed.combine({c: torch.tensor([s[c]], dtype=torch.float64) for c in ed.COMPONENTS}))


def rel_v2(s: dict, ref: dict) -> float:
    return (max(0.0, s["grain"] - ref["grain"]) / 2 + max(0.0, s["lattice"] - ref["lattice"]) / 0.2
            + math.hypot(s["cast"][0] - ref["cast"][0], s["cast"][1] - ref["cast"][1]) / 2
            + max(0.0, s["softness"] - ref["softness"]) / 0.1)


def figures(chains: dict) -> dict:
    """Per setting: chains passed and the AUC (bare: clean vs step 10; relative: step 1 vs step 10)."""
    out = {}
    for name, fn, relative in (("bare v2", bare_v2, False), ("bare v3", bare_v3, False),
                               ("relative v2", rel_v2, True), ("relative v3", rel.relative_score, True)):
        score = {c: {k: (fn(s, st[0]) if relative else fn(s)) for k, s in st.items()} for c, st in chains.items()}
        flat = [(c, k, v) for c, d in score.items() for k, v in d.items() if k >= 1]
        p = sensitivity([v for *_, v in flat], [k for _, k, _ in flat], [c for c, *_ in flat], lower_better=True)
        neg = [d[1] if relative else d[0] for d in score.values()]
        out[name] = {"n_chains": p["n_chains"], "passed": p["n_chains"] - p["n_failed"],
                     "auc": round(auc(neg, [d[10] for d in score.values()]), 3)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "bench/results/detector/signatures_before_after.json"))
    args = ap.parse_args(argv)
    if missing := missing_distribution_packages(*SIGNATURE_PACKAGES):
        raise SystemExit(f"apt-get install {' '.join(missing)}: the signature draw's photographs are missing")
    model = rel.StatsModel("cpu")
    results, pooled, groups = {}, {}, {}
    first = signature_draw(1)
    chain_seed, source_seed = first.chain_seed, first.source_seed
    for j, sig in enumerate(sg.SIGNATURES):
        chains, group_of = heldout_chains(
            20, 384, chain_seed + 100 * j, source_seed, model=model,
            sources=lambda side_, seed_, sig=sig: signature_sources(sig, side_, seed_),
            chain=lambda a, seed, n, sig=sig: sg.chain(a, sig, seed=seed, steps=n))
        results[sig] = figures(chains)
        pooled.update({f"{sig}/{c}": st for c, st in chains.items()})
        groups.update({f"{sig}/{c}": g for c, g in group_of.items()})
        print(sig, results[sig], flush=True)
    results["pooled"] = figures(pooled)
    for g in dict.fromkeys(groups.values()):
        results[f"pooled, {g}"] = figures({c: st for c, st in pooled.items() if groups[c] == g})
    print("pooled", results["pooled"], flush=True)
    write_results(args.out, {"command": "python -m bench.detector.signatures_before_after " + " ".join(argv or sys.argv[1:]),
                             "draw": [chain_seed, source_seed], "figures": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
