"""The signatures' components and candidate forms of them on the development draws: issue 42's lab bench.

    nice python -m bench.detector.component_variants [--draws 8] [--cache DIR] [--out FILE]
        [--signatures creases,speckles,simplified,jpeg] [--side 384] [--model-b 4]

The chains of signature draws 1..N (evidence.SIGNATURE_DRAWS, their seeds and sources as the validator makes them:
each was scored long ago, so none is held out any more; the held-out ones are SIGNATURE_HELD_OUT's, which this
refuses) are made once into --cache (steps 0, 1, 5, 10 and 20 of each, one .npz a chain; about 4 minutes for eight
draws, then reused); with --model-b N, also the chains of damage model B's draws 1..N (the validator's DRAWS:
Nano Banana Pro's kind, which a candidate must not lose; their sources include ../shared's reference images where
present). Each image is measured by the shipped detector and by each candidate of VARIANTS; then for
every signature:

- each component and candidate alone: ROC AUC clean vs step 10 across chains, and chains passing (steps 5, 10
  and 20 all above step 1);
- the bare score with the term settings of SETTINGS: the same two figures;
- edit_damage_rel (told the source, against step 0) in the forms of TOLD_SETTINGS: AUC step 1 vs step 10, chains
  passing; and the same over every signature's chains pooled (issue 42's goal is across sources and signatures),
  with the share of its pairs misordered by the two chains' signatures (where the pooled AUC loses);
- how far the lattice's amplitude moves on the same content (a re-render alone) and at each group's first step
  (edit_damage_rel's LATTICE_TOLERANCE);
- the four signature terms' (offset, unit) searched over UNIT_GRID, the other terms as shipped: the setting whose
  weakest group (signature, or model B) reads the highest AUC, and the one whose signatures pooled do; what
  weighing alone can reach on these draws, fitted to them (so an upper bound, not a candidate).

A candidate that does better here is only a candidate: the verdict is a new draw, made after it is fixed and scored
once (docs/edit-damage.md). What the candidates below showed is in docs/edit-damage-history.md ("Looked at after
version 11").
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import command_line, environment, results_path, write_results

KEPT = (0, 1, 5, 10, 20)
# the components read alone: the signatures' own, and those their damage moves the other way (a halo sharpens edges,
# flattened texture lowers the grain floor)
ALONE = ("crease", "speckles", "simplification", "blocking", "crease_edges", "softness", "grain")
CHECK_STEPS = (5, 10, 20)


@contextlib.contextmanager
def constants(module=None, **values):
    """`module`'s constants (default: the detector's model) set to `values` for the block (a candidate's form), then
    restored."""
    if module is None:
        from banana100.metrics.detector import model as module

    old = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)


def _crease(luma, **form) -> float:
    """The bare `crease` of one luma plane (1, 1, H, W), under the constants `form`."""
    from banana100.metrics.detector import filters, model

    with constants(None, **form):
        smooth = filters.gauss(luma, model.RESIDUAL_SIGMA)
        fine = filters.gauss(luma, model.DOG_SIGMAS[0])
        edges = model.EditDamage._edges(smooth)
        gx, gy = filters.central_differences(smooth)
        return float(model.EditDamage._crease(fine, edges, gx, gy, edges.flatten().nonzero()[:, 0]))


def _means_2x2(luma):
    from banana100.metrics.detector import filters

    return filters.means_2x2(luma)


TEXTURED_COHERENCE = 0.5  # a tile whose gradients share one direction this much holds an edge or a ramp, not texture


def _texture_lost_off_edges(luma) -> float:
    """Texture lost, read on textured tiles only: -log2 of the median fine band's amplitude over the coarse band's
    (model.DOG_SIGMAS, TEXTURE_SIGMAS) over the 16 px tiles with a coarse band of at least SIMPLIFY_STRUCTURE and
    gradients (sigma 1.5 px) of coherence under TEXTURED_COHERENCE; 0 over fewer than SIMPLIFY_MIN_TILES. The
    shipped component keeps edge tiles and looks for their fine band in the neighbours instead; a halo sharpens
    edges, which lowers it."""
    import torch
    import torch.nn.functional as F

    from banana100.metrics.detector import filters, model

    (a, b), (_, c) = model.DOG_SIGMAS, model.TEXTURE_SIGMAS
    ga, gb, gc = (filters.gauss(luma, s) for s in (a, b, c))
    fine, coarse = (F.avg_pool2d(x * x, model.TILE) for x in (ga - gb, gb - gc))
    gx, gy = filters.central_differences(filters.gauss(luma, 1.5))
    jxx, jyy, jxy = (F.avg_pool2d(x, model.TILE) for x in (gx * gx, gy * gy, gx * gy))
    coherence = torch.sqrt((jxx - jyy) ** 2 + 4 * jxy ** 2) / (jxx + jyy).clamp(min=1e-9)
    textured = (coarse >= model.SIMPLIFY_STRUCTURE ** 2) & (coherence < TEXTURED_COHERENCE)
    if int(textured.sum()) < model.SIMPLIFY_MIN_TILES:
        return 0.0
    return float(-torch.log2(torch.sqrt(fine[textured] / coarse[textured]).median()))


NEXT_EDGES = 0.20  # the candidate softness's edges: the strongest 20 % of the gradients less the shipped EDGE_SHARE


def _softness_on_next_edges(luma) -> float:
    """Crete's blur effect (the shipped softness) on the next edges: the detector's edges (`_edges`) at the
    strongest NEXT_EDGES of the gradients less the shipped ones, at EDGE_SHARE (0 where none). A halo and an
    edge-preserving flattening both work on the strongest contours: the one sharpens them, the other keeps them
    while it blurs the rest."""
    from banana100.metrics.detector import filters, model

    smooth = filters.gauss(luma, model.RESIDUAL_SIGMA)
    with constants(None, EDGE_SHARE=NEXT_EDGES):
        wider = model.EditDamage._edges(smooth)
    return float(model.EditDamage._softness(luma, wider & ~model.EditDamage._edges(smooth))[0])


# candidate -> (what it is, luma plane -> value)
VARIANTS = {
    "crease half scale": ("the crease on the luma's 2x2 means: its window reaches 8 px (the damage model's line lies "
                          "5.8-6.8 px off strong edges: bench.detector.crease_reach)",
                          lambda luma, model: _crease(_means_2x2(luma))),
    "crease reach 3": ("the crease's window 7 px", lambda luma, model: _crease(luma, CREASE_REACH=3)),
    "crease reach 6": ("the crease's window 13 px", lambda luma, model: _crease(luma, CREASE_REACH=6)),
    "crease z 1": ("steps back beyond 1 standard error, not 2", lambda luma, model: _crease(luma, CREASE_Z=1.0)),
    "crease z 0": ("every step back of the mean profile", lambda luma, model: _crease(luma, CREASE_Z=0.0)),
    "texture lost off edges": ("simplification read on textured tiles only (gradient coherence under 0.5), not on "
                               "edges", lambda luma, model: _texture_lost_off_edges(luma)),
    "softness on the next edges": ("softness read on the edges ranked 5-20 % by gradient, not the strongest 5 %: "
                                   "they show the image's own blur, which a flattening raises and a halo leaves",
                                   lambda luma, model: _softness_on_next_edges(luma)),
}
# bare term settings: name -> (what it is, BARE_UNITS' entries replaced[, components read as a candidate of VARIANTS
# instead]); simplification's term kept at 0 where it is not measured whatever its offset: a uniform image must add
# nothing
SETTINGS = {
    "shipped": ("the shipped units (versions 11 and 12 alike)", {}),
    "simplification from -0.5": ("the texture lost counted from -0.5 halvings (clean photographs read -0.1 to -1.8: "
                                 "the clamp at 0 hid the first steps' rise)", {"simplification": (-0.5, 0.25)}),
    "the fit's rule, offsets below 0": (
        "what bench.detector.fit_edit_damage's rule picks on its own data when simplification's offsets go down to "
        "-1 (--offsets simplification=-1,-0.5,0,0.5,1,1.5: bench/results/detector/"
        "fit_edit_damage_simplification_below_0.json)",
        {"simplification": (-0.5, 0.25), "speckles": (0.0, 100.0), "blocking": (0.5, 0.25)}),
    "texture lost off edges": ("the shipped units, simplification read as VARIANTS' 'texture lost off edges'", {},
                               {"simplification": "texture lost off edges"}),
    "softness on the next edges": ("the shipped units, softness read as VARIANTS' 'softness on the next edges'", {},
                                   {"softness": "softness on the next edges"}),
}


# edit_damage_rel's forms: name -> (what it is, `relative`'s constants replaced)
TOLD_SETTINGS = {
    "shipped": ("the shipped one (version 14's)", {}),
    "lattice tolerance 0.1 (version 11)": ("the lattice's amplitude compared as grain's, beyond a tenth of the "
                                           "source's own", {"LATTICE_TOLERANCE": 0.1}),
    "colour softness unit 0.1 (version 12)": ("colour edges blurred over softness's unit, not twice it",
                                              {"REL_UNITS": {"colour_softness": 0.1}}),
    # not a candidate: how far the pooled AUC's shortfall is JPEG's first save (its blocking is there from step 1 and
    # hardly grows), counted a third as much
    "blocking unit 3": ("blocking over a mean step of 3 levels at the grid, not 1", {"REL_UNITS": {"blocking": 3.0}}),
}
# the unit search again with these candidates in their components' places: the weakest signatures' best forms alone
# (simplification off edges 0.891 against 0.840 on the simplified chains; no crease candidate reads more than the crease)
CEILING_READ_AS = {"simplification": "texture lost off edges"}
# the signature terms' (offset, unit) searched by `unit_search`, each around its shipped setting; simplification's term
# kept at 0 where it is not measured, as in SETTINGS
UNIT_GRID = {
    "crease": ((0.0, 0.05), (0.0, 0.1), (0.0, 0.2), (0.0, 0.4), (0.1, 0.1), (0.2, 0.1)),
    "speckles": tuple((o, u) for o in (0.0, 50.0, 100.0) for u in (50.0, 100.0, 200.0)),
    "simplification": tuple((o, u) for o in (-0.5, -0.25, 0.0) for u in (0.125, 0.25, 0.5)),
    "blocking": tuple((o, u) for o in (0.25, 0.5) for u in (0.125, 0.25, 0.5)),
}


def _kept(f: Path, group: str, make) -> bool:
    """The chain's kept steps (make() -> {step: image}) written to `f` with its source group, unless `f` is there;
    whether it was made."""
    if f.exists():
        return False
    f.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(f, group=group, **{f"step{k}": v for k, v in make().items()})
    return True


def make_chains(cache: Path, draws, signatures, side: int) -> dict[str, Path]:
    """{draw/signature/source: its .npz}, made where absent (the validator's sources and chain seeds)."""
    from bench.detector import signatures as sg
    from bench.detector.validate_edit_damage import signature_sources

    files = {}
    for d in draws:
        for j, sig in enumerate(sg.SIGNATURES):
            if sig not in signatures:
                continue
            i = 0  # the chain's index in its draw: seed = the draw's + 100 x the signature's index + it
            made = 0
            for group, images in signature_sources(sig, side, d.source_seed).items():
                for name, a in images.items():
                    f = cache / f"{side}px" / f"d{d.number}" / sig / f"{name.replace(' ', '_')}.npz"
                    seed = d.chain_seed + 100 * j + i
                    i += 1
                    files[f"d{d.number}/{sig}/{name}"] = f
                    made += _kept(f, group, lambda a=a, sig=sig, seed=seed: sg.chain(a, sig, seed=seed, steps=max(KEPT),
                                                                                      keep=KEPT))
            print(f"draw {d.number}, {sig}: {i} chains ({made} made)", flush=True)
    return files


MODEL_B = "model B"  # the chains of damage model B (bench/detector/damage_model_b.py), beside the signatures'


def make_model_b_chains(cache: Path, draws: int, side: int) -> dict[str, Path]:
    """{bN/model B/source: its .npz} of damage model B's draws 1..`draws` (the validator's DRAWS), made where absent."""
    from bench.detector import damage_model_b
    from bench.detector.validate_edit_damage import DRAWS, heldout_sources

    files = {}
    for n, (chain_seed, source_seed) in enumerate(list(DRAWS.values())[:draws], start=1):
        i, made = 0, 0
        for group, images in heldout_sources(side, source_seed).items():
            for name, a in images.items():
                f = cache / f"{side}px" / f"b{n}" / f"{name.replace(' ', '_')}.npz"
                seed = chain_seed + i  # as the validator's heldout_chains: the draw's seed plus the chain's index
                i += 1
                files[f"b{n}/{MODEL_B}/{name}"] = f
                made += _kept(f, group, lambda a=a, seed=seed: damage_model_b.chain(a, seed=seed, steps=max(KEPT),
                                                                                     keep=KEPT))
        print(f"damage model B, draw {n}: {i} chains ({made} made)", flush=True)
    return files


def measure(files: dict[str, Path], variants=None) -> dict[str, dict[int, dict]]:
    """{chain: {step: the statistics edit_damage_rel reads (the shipped components, the cast) and the value of each
    candidate of `variants` (default VARIANTS; {} for none)}}."""
    import torch

    from banana100.metrics.detector import filters, model
    from banana100.metrics.detector.relative import StatsModel

    variants = VARIANTS if variants is None else variants
    stats_model = StatsModel("cpu")
    out = {}
    for n, (chain, f) in enumerate(files.items()):
        with np.load(f) as z:
            steps = {k: z[f"step{k}"] for k in KEPT}
        out[chain] = dict(zip(steps, stats_model(list(steps.values())), strict=True))
        for k, a in steps.items():
            luma = filters.luma_of(torch.from_numpy(a).permute(2, 0, 1)[None].float())
            with torch.inference_mode():
                out[chain][k].update({v: fn(luma, model) for v, (_, fn) in variants.items()})
        if (n + 1) % 50 == 0:
            print(f"{n + 1} of {len(files)} chains measured", flush=True)
    return out


def told_figures(chains: dict[str, dict[int, dict]], **form) -> dict:
    """edit_damage_rel against step 0, under `relative`'s constants `form`: ROC AUC step 1 vs step 10 across chains,
    and the chains passing."""
    from banana100.metrics.detector import relative

    # a dict replaces only the entries it names (REL_UNITS' colour_softness, say)
    form = {k: {**getattr(relative, k), **v} if isinstance(v, dict) else v for k, v in form.items()}
    with constants(relative, **form):
        told = {c: {k: relative.relative_score(st[k], st[0]) for k in KEPT if k} for c, st in chains.items()}
    return figures(told, against=1)


def told_misordered(chains: dict[str, dict[int, dict]]) -> dict:
    """Where the pooled told-the-source AUC (step 1 vs step 10 across every chain) loses: the share of all its
    (step 1, step 10) pairs that are misordered (ties half), by the step-1 chain's signature and the step-10
    chain's; the shares add up to 1 - AUC."""
    from banana100.metrics.detector import relative

    sig = {c: c.split("/")[1] for c in chains}
    score = {c: {k: relative.relative_score(st[k], st[0]) for k in (1, 10)} for c, st in chains.items()}
    groups = list(dict.fromkeys(sig.values()))
    n = len(chains) ** 2
    out = {}
    for a in groups:
        first = np.array([score[c][1] for c in chains if sig[c] == a])
        for b in groups:
            tenth = np.array([score[c][10] for c in chains if sig[c] == b])
            lost = (tenth[None, :] < first[:, None]).sum() + 0.5 * (tenth[None, :] == first[:, None]).sum()
            out.setdefault(a, {})[b] = round(float(lost) / n, 4)
    return out


def bare_score(row: dict[str, float], replaced: dict, read_as: dict | None = None) -> float:
    """The bare score of one image's components with BARE_UNITS' `replaced` entries, and components `read_as` a
    candidate of VARIANTS ({component: candidate})."""
    import torch

    from banana100.metrics.detector import model

    row = {**row, **{k: row[v] for k, v in (read_as or {}).items()}}
    one = {k: torch.tensor(row[k], dtype=torch.float64) for k in model.COMPONENTS}
    terms = model.term_tensors(one, units={**model.BARE_UNITS, **replaced})
    if row["simplification"] == 0.0:  # not measured (fewer than SIMPLIFY_MIN_TILES structured tiles)
        terms["simplification"] = torch.zeros((), dtype=torch.float64)
    return float(sum(terms.values()))


def figures(values: dict[str, dict[int, float]], against: int = 0) -> dict:
    """ROC AUC of step `against` (0: the clean source; 1 told the source) vs step 10 across chains, and the chains
    passing (CHECK_STEPS all above step 1), of {chain: {step: value}}."""
    from banana100.metrics.detector.evidence import auc

    passed = [c for c, v in values.items() if all(v[k] > v[1] for k in CHECK_STEPS)]
    name = "auc_clean_vs_step10" if against == 0 else f"auc_step{against}_vs_step10"
    return {name: round(auc([v[against] for v in values.values()], [v[10] for v in values.values()]), 3),
            "passed": len(passed), "chains": len(values)}


def summarise(measured: dict, signatures) -> dict:
    """By signature (or MODEL_B): each component and candidate alone, the bare score under SETTINGS, and told the
    source under TOLD_SETTINGS."""
    out = {}
    for sig in signatures:
        chains = {c: st for c, st in measured.items() if c.split("/")[1] == sig}
        if not chains:
            continue
        alone = {n: figures({c: {k: st[k][n] for k in KEPT} for c, st in chains.items()})
                 for n in (*ALONE, *VARIANTS)}
        bare = {n: figures({c: {k: bare_score(st[k], *setting[1:]) for k in KEPT} for c, st in chains.items()})
                for n, setting in SETTINGS.items()}
        told = {n: told_figures(chains, **form) for n, (_, form) in TOLD_SETTINGS.items()}
        out[sig] = {"alone": alone, "bare": bare, "told the source": told}
    return out


RERENDERS = 4  # re-renders alone of each source, for the move of a statistic on the same content


def same_content_moves(files: dict[str, Path], measured: dict, name: str = "lattice_level", least: float = 0.3) -> dict:
    """How far `name` moves on the same content: its ratio to the source's own after a re-render alone (RERENDERS
    of each distinct source, signatures.rerender), and after each group's first step, over the sources where it is
    at least `least` (quantiles 50, 90, 95, 99 %, and the largest)."""
    from banana100.metrics.detector.relative import StatsModel
    from bench.detector import signatures as sg

    quantiles = lambda r: [round(float(q), 3) for q in np.quantile(r, (0.5, 0.9, 0.95, 0.99, 1.0))]  # noqa: E731
    stats_model, ratios, seen = StatsModel("cpu"), [], set()
    for chain, f in files.items():
        own = measured[chain][0][name]
        key = (chain.split("/")[-1], round(own, 6))  # one source drawn alike in several draws counts once
        if own < least or key in seen:
            continue
        seen.add(key)
        with np.load(f) as z:
            source = z["step0"]
        moved = stats_model([sg.rerender(source, np.random.default_rng(s)) for s in range(RERENDERS)])
        ratios += [m[name] / own for m in moved]
    first = {}
    for chain, st in measured.items():
        if st[0][name] >= least:
            first.setdefault(chain.split("/")[1], []).append(st[1][name] / st[0][name])
    return {"component": name, "least": least, "quantiles": [50, 90, 95, 99, 100],
            "rerender_alone": {"ratios": len(ratios), "sources": len(seen), "quantiles_of_ratio": quantiles(ratios)},
            "first_step": {g: {"chains": len(r), "quantiles_of_ratio": quantiles(r)} for g, r in first.items()}}


def unit_search(measured: dict, groups, read_as: dict | None = None) -> dict:
    """The UNIT_GRID settings' figures by group: the shipped one, the best on the weakest group's AUC and the best on
    the signatures' pooled AUC (clean vs step 10); with components `read_as` a candidate of VARIANTS ({component:
    candidate}), what weighing reaches with that candidate in the component's place."""
    import itertools

    import torch

    from banana100.metrics.detector import model
    from banana100.metrics.detector.evidence import auc

    chains = [c for c in measured if c.split("/")[1] in groups]
    group = np.array([c.split("/")[1] for c in chains])
    read = {**{n: n for n in model.COMPONENTS}, **(read_as or {})}
    comp = {n: torch.tensor([[measured[c][k][read[n]] for k in KEPT] for c in chains], dtype=torch.float64)
            for n in model.COMPONENTS}
    shipped_terms = model.term_tensors(comp)
    base = sum(shipped_terms[t].numpy() for t in model.TERMS if t not in UNIT_GRID)
    measured_texture = comp["simplification"].numpy() != 0

    def term(name, offset, unit):
        t = (comp[name].numpy() - offset).clip(min=0) / unit
        return np.where(measured_texture, t, 0.0) if name == "simplification" else t

    terms = {n: [term(n, *ou) for ou in options] for n, options in UNIT_GRID.items()}
    i1, i5, i10, i20 = (KEPT.index(k) for k in (1, 5, 10, 20))
    signatures = group != MODEL_B

    def figures_of(score):
        out = {}
        for g in groups:
            x = score[group == g]
            out[g] = {"auc_clean_vs_step10": round(auc(list(x[:, 0]), list(x[:, i10])), 3),
                      "passed": int(((x[:, i5] > x[:, i1]) & (x[:, i10] > x[:, i1]) & (x[:, i20] > x[:, i1])).sum()),
                      "chains": len(x)}
        out["signatures pooled"] = round(auc(list(score[signatures, 0]), list(score[signatures, i10])), 3)
        return out

    found = []
    for idx in itertools.product(*(range(len(v)) for v in UNIT_GRID.values())):
        f = figures_of(base + sum(terms[n][i] for n, i in zip(UNIT_GRID, idx, strict=True)))
        found.append(({n: list(UNIT_GRID[n][i]) for n, i in zip(UNIT_GRID, idx, strict=True)}, f))
    weakest = lambda f: min(f[g]["auc_clean_vs_step10"] for g in groups)  # noqa: E731
    shipped = base + sum(shipped_terms[n].numpy() for n in UNIT_GRID)
    best_weakest = max(found, key=lambda r: weakest(r[1]))
    best_pooled = max(found, key=lambda r: r[1]["signatures pooled"])
    return {"settings_searched": len(found), "shipped": figures_of(shipped),
            "best_weakest_group": {"units": best_weakest[0], "figures": best_weakest[1]},
            "best_signatures_pooled": {"units": best_pooled[0], "figures": best_pooled[1]}}


def add_chain_arguments(ap: argparse.ArgumentParser) -> None:
    """The development chains' options (--draws, --side, --cache, --model-b), for `development_chains`: this
    bench's and the others' that read its cache (bench/detector/learned_combination.py)."""
    ap.add_argument("--draws", type=int, default=8, help="draws 1..N (default 8)")
    ap.add_argument("--side", type=int, default=384, help="the sources' width, as the validator's --heldout-side")
    ap.add_argument("--cache", default="/tmp/banana100-component-variants", help="the chains, made once")
    ap.add_argument("--model-b", type=int, default=4, help="also damage model B's draws 1..N (default 4; 0: none)")


def development_chains(ap: argparse.ArgumentParser, args, signatures) -> dict[str, Path]:
    """{chain: its .npz} of `signatures`' draws 1..args.draws and damage model B's 1..args.model_b, made into
    args.cache where absent; `ap.error` for a held-out draw, a draw of model B it has no seeds for, or Debian's
    packages of the draws' photographs missing."""
    from banana100.metrics.detector.evidence import SIGNATURE_DRAWS, SIGNATURE_HELD_OUT
    from bench.detector.validate_edit_damage import DRAWS, SIGNATURE_PACKAGES, missing_distribution_packages

    if args.draws >= min(SIGNATURE_HELD_OUT):
        ap.error(f"--draws {args.draws}: draws {', '.join(map(str, SIGNATURE_HELD_OUT))} hold the current version's "
                 f"held-out figures; development looks below them")
    if missing := missing_distribution_packages(*SIGNATURE_PACKAGES):
        ap.error(f"the draws' photographs need Debian's {', '.join(missing)} (apt-get install {' '.join(missing)})")
    if not 0 <= args.model_b <= len(DRAWS):
        ap.error(f"--model-b {args.model_b}: damage model B has draws 1..{len(DRAWS)} under its seeds")
    files = make_chains(Path(args.cache), SIGNATURE_DRAWS[:args.draws], signatures, args.side)
    files.update(make_model_b_chains(Path(args.cache), args.model_b, args.side))
    return files


def main(argv=None) -> int:
    from banana100.metrics.detector.evidence import SIGNATURE_DRAWS
    from bench.detector import signatures as sg

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--signatures", default=",".join(sg.SIGNATURES))
    add_chain_arguments(ap)
    ap.add_argument("--out", default=str(results_path(__file__)))
    args = ap.parse_args(argv)
    signatures = args.signatures.split(",")
    if unknown := [s for s in signatures if s not in sg.SIGNATURES]:
        ap.error(f"unknown signature {unknown[0]!r}; choose from {', '.join(sg.SIGNATURES)}")
    files = development_chains(ap, args, signatures)
    groups = [*signatures, *([MODEL_B] if args.model_b else [])]
    measured = measure(files)
    result = summarise(measured, groups)
    # issue 42's told-the-source goal is across every source and signature: their chains pooled
    pooled = {c: st for c, st in measured.items() if c.split("/")[1] in signatures}
    told_pooled = {n: told_figures(pooled, **form) for n, (_, form) in TOLD_SETTINGS.items()}
    misordered = told_misordered(pooled)
    search = unit_search(measured, groups)
    # the ceiling with the best candidate for each weak signature in its component's place (an upper bound again)
    search_best = unit_search(measured, groups, read_as=CEILING_READ_AS)
    moves = same_content_moves(files, measured)
    print(f"lattice_level over the source's own (quantiles 50-90-95-99-100 %): a re-render alone "
          f"{moves['rerender_alone']['quantiles_of_ratio']}; the first step "
          + "; ".join(f"{g} {m['quantiles_of_ratio']}" for g, m in moves["first_step"].items()))
    for sig, r in result.items():
        print(f"{sig}, {next(iter(r['alone'].values()))['chains']} chains (AUC clean vs step 10, passed):")
        for part in ("alone", "bare"):
            print(f"  {part}: " + "; ".join(f"{n} {f['auc_clean_vs_step10']:.3f}, {f['passed']}"
                                              for n, f in r[part].items()))
        print("  told the source (AUC step 1 vs 10, passed): " + "; ".join(
            f"{n} {f['auc_step1_vs_step10']:.3f}, {f['passed']}" for n, f in r["told the source"].items()))
    print("signatures pooled, told the source (AUC step 1 vs 10, passed): " + "; ".join(
        f"{n} {f['auc_step1_vs_step10']:.3f}, {f['passed']}" for n, f in told_pooled.items()))
    print("told the source, the pooled AUC's misordered pairs (share of all) by step 1's signature: " + "; ".join(
        f"{a} {sum(row.values()):.4f}" for a, row in misordered.items()))
    for label, found in (("", search), (f" read as {CEILING_READ_AS}", search_best)):
        for name in ("shipped", "best_weakest_group", "best_signatures_pooled"):
            f = found[name] if name == "shipped" else found[name]["figures"]
            units = "" if name == "shipped" else f" {found[name]['units']}"
            print(f"units{label} {name}{units}: " + "; ".join(
                f"{g} {f[g]['auc_clean_vs_step10']:.3f}, {f[g]['passed']}" for g in groups)
                + f"; signatures pooled {f['signatures pooled']:.3f}")
    write_results(Path(args.out), {
        "command": command_line("bench.detector.component_variants", argv or sys.argv[1:], {args.cache: "DIR"}),
        "environment": environment(), "draws": [d.number for d in SIGNATURE_DRAWS[:args.draws]],
        "model_b_draws": list(range(1, args.model_b + 1)), "side": args.side,
        "variants": {n: what for n, (what, _) in VARIANTS.items()},
        "told_settings": {n: {"what": what, "constants": form} for n, (what, form) in TOLD_SETTINGS.items()},
        "settings": {n: {"what": what, "bare_units": {k: list(v) for k, v in replaced.items()},
                         **({"read_as": read_as[0]} if read_as else {})}
                     for n, (what, replaced, *read_as) in SETTINGS.items()},
        "signatures": result, "told_the_source_signatures_pooled": told_pooled,
        "told_the_source_pooled_misordered_pairs": {"rows": "step 1's signature", "columns": "step 10's",
                                                    "shares": misordered}, "unit_search": search,
        "unit_search_candidates": {"read_as": CEILING_READ_AS, **search_best},
        "same_content_moves": moves})
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
