"""bench/detector/fit_edit_damage.py's pairs: what the fit counts as a wrong order (no fit is run here)."""

from __future__ import annotations

import json
import math

import pytest

from fixtures.repopaths import REPO
from bench.detector import fit_edit_damage as fit


def test_pairs_order_each_damage_by_strength_from_the_clean_source():
    kind = ["clean", "jpeg 90", "jpeg 30", "blur 1", "blur 2", "blur 3", "tint 1.08", "rep step 0", "rep step 5",
            "rep step 10"]
    group = ["a"] * 7 + ["rep/a"] * 3
    labels = [0, 0, 0, 1, 1, 1, 1, 0, 1, 1]
    pairs = {tuple(p) for p in fit.pairs_of(labels, group, kind).tolist()}
    assert pairs == {
        (0, 3), (0, 4), (0, 5), (3, 4), (3, 5), (4, 5),  # clean < blur 1 < blur 2 < blur 3
        (0, 6),  # clean < tint
        (7, 8), (7, 9), (8, 9),  # step 0 < step 5 < step 10
    }  # JPEG copies are clean: no pair orders them


def test_stronger_damage_below_a_weaker_one_counts_as_wrong():
    """The share the fit maximises first: a score falling with blur strength loses pairs even when every
    blurred copy scores above its clean source."""
    import numpy as np

    kind, group, labels = ["clean", "blur 1", "blur 2"], ["a"] * 3, [0, 1, 1]
    pairs = fit.pairs_of(labels, group, kind)
    falling = np.array([0.0, 2.0, 1.0])  # both above clean, but blur 2 below blur 1
    assert fit.pair_share(falling, pairs) == pytest.approx(2 / 3)
    assert fit.pair_share(np.array([0.0, 1.0, 1.0]), pairs) == pytest.approx(5 / 6)  # a tie counts half
    assert fit.pair_share(np.array([0.0, 1.0, 2.0]), pairs) == 1.0


def test_noisy_base_pairs_keep_one_family_in_the_whole_lists_indices():
    """The noisy-base report orders each damage family from its own clean base, in the indices of the
    whole list (other families and other sources interleaved)."""
    kind = ["clean", "correlated grain 3", "blur 1", "correlated grain 6", "clean", "correlated grain 3"]
    group = ["a", "a", "a", "a", "b", "b"]
    got = {tuple(p) for p in fit.family_pairs(group, kind, "correlated grain").tolist()}
    assert got == {(0, 1), (0, 3), (1, 3), (4, 5)}
    assert {tuple(p) for p in fit.family_pairs(group, kind, "blur").tolist()} == {(0, 2)}


def test_the_weakness_the_docs_state_is_real_more_grain_on_a_grainy_base_lowers_the_bare_score():
    """docs/edit-damage.md and the card say it, so it must be true of the shipped score: white noise of 4
    levels on a flat image, then correlated grain on top: the ratio term falls faster than the floor
    rises, so the bare score drops while the grain it measures rises; edit_damage_rel, which compares
    grain itself, rises. A form that fixes this flips the bare assertion, with the docs' paragraph."""
    import numpy as np
    import torch

    from banana100.metrics.detector import model as ed
    from banana100.metrics.detector import relative as rel

    flat = np.full((256, 256, 3), 128, np.uint8)
    base = fit.white(flat, 4, seed=11)
    grainy = fit.correlated(base, 12, seed=7)
    model = rel.StatsModel("cpu")
    s_base, s_grainy = model([base, grainy])
    assert s_grainy["grain"] > s_base["grain"]
    comps = lambda s: {k: torch.tensor([s[k]], dtype=torch.float64) for k in ed.COMPONENTS}
    assert float(ed.combine(comps(s_grainy))) < float(ed.combine(comps(s_base)))
    assert rel.relative_score(s_grainy, s_base) > rel.relative_score(s_base, s_base)


def test_every_fit_source_is_the_same_on_every_run():
    """skimage's binary_blobs is drawn at random unless seeded: unseeded, each rerun of the fit fitted
    other data and could choose other constants."""
    import numpy as np

    for name in fit.FIT_SOURCES:
        assert np.array_equal(fit.source(name), fit.source(name)), name


def test_the_held_out_sensitivity_changes_one_thing_each_and_counts_what_it_says():
    """bench/detector/heldout_sensitivity.py: each change differs from the shipped setting in one place (so its
    figure is that change's; the named settings of SEVERAL in theirs), the shipped one is the code's, and its
    figures are the AUC and falls asked."""
    from banana100.metrics.detector import model as ed

    from bench.detector import heldout_sensitivity as sens
    shipped = sens.CHANGES["shipped"]
    assert shipped == {"floor": ed.GRAIN_ABS, "ratio": ed.GRAIN_RATIO, "units": ed.BARE_UNITS, "even": True}
    for name, change in sens.CHANGES.items():
        moved = [k for k in ("floor", "ratio", "even") if change[k] != shipped[k]]
        moved += [k for k in ("floor",) if change["floor"][0] != shipped["floor"][0] and change["floor"][1] != shipped["floor"][1]]
        moved += [u for u in ed.TERMS[1:] if change["units"][u] != shipped["units"][u]]
        assert len(moved) == (0 if name == "shipped" else sens.SEVERAL.get(name, 1)), (name, moved)
    # the setting before the evenness refit is the one the fit's results recorded then
    before = sens.CHANGES[sens.BEFORE]
    assert before["floor"] == (6.0, 1.5) and before["units"]["colour_cast"] == (0.0, 8.0) and not before["even"]
    # the refit without the photographs is what that fit chose, as its results file says
    without = json.loads((REPO / "bench/results/detector/fit_edit_damage_without_photographs.json").read_text())["chosen"]
    refit = sens.CHANGES[sens.WITHOUT_PHOTOGRAPHS]
    assert refit["floor"] == tuple(without["grain_abs"]) and refit["ratio"] == tuple(without["grain_ratio"])
    assert refit["units"]["colour_cast"][1] == without["cast_unit"] and refit["even"] is without["evenness"]
    # the shipped setting is the fit's: the earlier constants it held and the signatures' it chose
    fitted = json.loads((REPO / "bench/results/detector/fit_edit_damage.json").read_text())
    held = fitted["held"]
    assert shipped["floor"] == (held["grain_abs_cap"], held["grain_abs_unit"])
    assert shipped["ratio"] == (held["offset"], held["unit"])
    assert shipped["units"]["colour_cast"][1] == held["cast_unit"]
    assert shipped["units"]["lattice"][1] == held["lattice_unit"]
    assert shipped["units"]["softness"][0] == held["softness_offset"] and held["evenness"] is True
    for t in ed.SIGNATURE_TERMS:
        chosen = fitted["signatures"][t]
        assert shipped["units"][t] == (tuple(chosen) if chosen else (0.0, math.inf)), t

    def stats(grain):  # texture = grain: no ratio term, the score rises with grain alone
        return {**dict.fromkeys(ed.COMPONENTS, 0.0), "grain": grain, "texture": grain, "evenness": 1.0}

    # two draws of two chains: in the first, step 10 of one chain scores below the other's clean image
    chains = {"d1": {"a": {"group": "generated", "stats": {0: stats(0.5), 10: stats(2.0)}},
                     "b": {"group": "photo", "stats": {0: stats(3.0), 10: stats(4.0)}}},
              "d2": {"a": {"group": "generated", "stats": {0: stats(1.0), 10: stats(0.5)}},
                     "b": {"group": "photo", "stats": {0: stats(1.0), 10: stats(5.0)}}}}
    r = sens.figures(chains, shipped)
    assert r["auc_by_draw"] == {"d1": 0.75, "d2": 0.5}  # d2: 5 above both clean, 0.5 below both
    assert r["auc_photographs_by_draw"] == {"d1": 1.0, "d2": 1.0}  # chain b alone
    assert r["chains_step10_at_or_below_clean"] == 1 and r["n_chains"] == 4
    def score(grain):
        return sum(ed.terms(stats(grain)).values())

    clean, damaged = [score(0.5), score(3.0), score(1.0), score(1.0)], [score(2.0), score(4.0), score(0.5), score(5.0)]
    wins = sum((d > c) + 0.5 * (d == c) for d in damaged for c in clean)
    assert r["auc_pooled"] == pytest.approx(round(wins / 16, 4))


def test_the_fit_takes_the_mate_photographs_only_and_names_their_package(monkeypatch, tmp_path):
    """The fit's sources end with MATE's 12 photographs (the Plasma ones and the sixth draw's stay held out);
    without the package the fit stops and says what to install."""
    from bench.detector import validate_edit_damage as validate
    mate = [n for n, (pkg, _) in validate.DISTRIBUTION_PHOTOGRAPHS.items() if pkg == fit.FIT_PHOTOGRAPHS_PACKAGE]
    assert len(mate) == 12
    monkeypatch.setattr(validate, "DISTRIBUTION_ROOT", tmp_path)
    with pytest.raises(SystemExit, match="apt-get install mate-backgrounds"):
        fit.fit_sources()
    for n in mate:
        f = tmp_path / validate.DISTRIBUTION_PHOTOGRAPHS[n][1]
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"")
    sources = fit.fit_sources()
    assert sources[-len(mate):] == [f"deb:{n}" for n in mate]
    held = [n for n, (pkg, _) in validate.DISTRIBUTION_PHOTOGRAPHS.items() if pkg != fit.FIT_PHOTOGRAPHS_PACKAGE]
    assert held and not any(f"deb:{n}" in sources for n in held)
    assert set(validate.SIXTH_PACKAGES).isdisjoint({fit.FIT_PHOTOGRAPHS_PACKAGE, *validate.FRESH_PACKAGES})
    shipped = json.loads((REPO / "bench/results/detector/fit_edit_damage.json").read_text())["sources"]
    assert shipped == sources  # the shipped fit is of these sources


def test_the_fit_refuses_a_cache_of_other_sources(tmp_path, monkeypatch, capsys):
    """A --cache written for another source list (before the photographs joined, say) is refused before any
    fitting: it would fit the wrong data under this run's name."""
    from bench.detector import validate_edit_damage as validate
    monkeypatch.setattr(validate, "DISTRIBUTION_ROOT", tmp_path)
    for n, (pkg, path) in validate.DISTRIBUTION_PHOTOGRAPHS.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(b"")
    cache = tmp_path / "cache.json"
    cache.write_text(json.dumps({"detector_version": fit.detector_version(), "stats": [{}], "labels": [0],
                                 "group": ["astronaut"], "kind": ["clean"]}))
    with pytest.raises(SystemExit):
        fit.main(["--cache", str(cache), "--out", str(tmp_path / "out.json")])
    assert "holds the fit data of other sources" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def test_a_cache_another_version_of_the_detector_measured_is_refused(tmp_path, capsys):
    """A fit cache holds one version's statistics (version 5 changed the crease): fitted as another's, its
    figures would be wrong under this run's name, so the fit and the sensitivity refuse it before any work."""
    from bench.detector import heldout_sensitivity

    cache = tmp_path / "cache.json"
    for version in ({}, {"detector_version": fit.detector_version() - 1}):
        cache.write_text(json.dumps({**version, "stats": [{}], "labels": [0], "group": ["astronaut"], "kind": ["clean"]}))
        for run in (lambda: fit.main(["--cache", str(cache), "--out", str(tmp_path / "out.json")]),
                    lambda: heldout_sensitivity.main(["--fit-cache", str(cache), "--out", str(tmp_path / "s.json")])):
            with pytest.raises(SystemExit):
                run()
            assert f"this is version {fit.detector_version()}" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "s.json").exists()


def test_the_sensitivity_keeps_the_recorded_photograph_draws_when_their_photographs_are_missing(tmp_path, monkeypatch):
    """Rerun on a machine without the Debian photographs, heldout_sensitivity.py keeps each change's
    recorded fifth- and sixth-draw figures and recomputes the rest."""
    from bench.detector import heldout_sensitivity as sens
    from bench.detector import validate_edit_damage as validate
    from banana100.metrics.detector import model as ed
    stats = lambda g: {**dict.fromkeys(ed.COMPONENTS, 0.0), "grain": g, "texture": g, "evenness": 1.0}
    chains = {"d": {"a": {"group": "generated", "stats": {0: stats(0.5), 10: stats(2.0)}},
                    "b": {"group": "photo", "stats": {0: stats(1.0), 10: stats(3.0)}}}}
    monkeypatch.setattr(sens, "heldout_components", lambda: chains)
    monkeypatch.setattr(validate, "DISTRIBUTION_ROOT", tmp_path / "absent")
    out = tmp_path / "sens.json"
    out.write_text(json.dumps({"changes": {"shipped": {"fifth_draw": {"all": 0.881}, "sixth_draw": {"all": 0.95}}}}))
    assert sens.main(["--out", str(out)]) == 0
    got = json.loads(out.read_text())["changes"]
    assert got["shipped"]["fifth_draw"] == {"all": 0.881} and got["shipped"]["sixth_draw"] == {"all": 0.95}
    assert got["shipped"]["n_chains"] == 2
    assert "fifth_draw" not in got["grain cap 6"] and "sixth_draw" not in got["grain cap 6"]


def test_offsets_replace_one_terms_offsets_and_bad_ones_are_refused():
    """--offsets TERM=A,B,... (a lab question: texture lost below 0) searches those offsets for that term only."""
    def error(message):
        raise SystemExit(message)

    grid = fit.signature_grid(["simplification=-1,-0.5,0"], error)
    assert grid["simplification"] == ((-1.0, -0.5, 0.0), fit.SIGNATURE_GRID["simplification"][1])
    assert {t: g for t, g in grid.items() if t != "simplification"} == {
        t: g for t, g in fit.SIGNATURE_GRID.items() if t != "simplification"}
    assert fit.signature_grid([], error) == fit.SIGNATURE_GRID
    with pytest.raises(SystemExit, match="no signature term 'grain'"):
        fit.signature_grid(["grain=0,1"], error)
    with pytest.raises(SystemExit, match="offsets are numbers"):
        fit.signature_grid(["crease=0,a"], error)
