"""bench/detector/component_variants.py: the lab bench of issue 42's components reads what the detector reads, keeps
to the development draws, and makes its chains once."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from banana100.metrics.detector import filters, model


def _disc_with_a_line(distance: float) -> torch.Tensor:
    from bench.detector import crease_reach

    base, r = crease_reach.disc()
    luma = base + 30 * np.exp(-((r - (crease_reach.RADIUS + distance)) ** 2) / (2 * 0.6 ** 2))
    rgb = np.repeat(np.clip(luma + 0.5, 0, 255).astype(np.uint8)[..., None], 3, axis=2)
    return torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255


def test_the_bench_crease_is_the_detectors_and_a_form_is_restored_after_it():
    from bench.detector import component_variants as cv

    x = _disc_with_a_line(4)
    detector = model.EditDamage()
    with torch.inference_mode():
        detector(x)
        luma = filters.luma_of(x * 255)
        shipped = cv._crease(luma)
        wide = cv._crease(luma, CREASE_REACH=6)
    assert shipped == pytest.approx(float(detector.last_components["crease"][0]), abs=1e-6) and shipped > 0
    assert wide != shipped and model.CREASE_REACH == 4  # the form was used, then put back


def test_a_settings_bare_score_is_the_detectors_with_its_units_and_no_term_where_texture_is_not_measured():
    from bench.detector import component_variants as cv

    x = _disc_with_a_line(4)
    detector = model.EditDamage()
    with torch.inference_mode():
        score = float(detector(x)[0])
    row = {c: float(v[0]) for c, v in detector.last_components.items()}
    assert cv.bare_score(row, {}) == pytest.approx(score)
    row["simplification"] = 0.0  # not measured: no term whatever the offset
    assert cv.bare_score(row, {"simplification": (-0.5, 0.25)}) == pytest.approx(cv.bare_score(row, {}))
    row["simplification"] = -0.25
    assert cv.bare_score(row, {"simplification": (-0.5, 0.25)}) == pytest.approx(cv.bare_score(row, {}) + 1.0)
    row["texture lost off edges"] = 0.5  # a setting may read a component as a candidate: its term is 0.5 / 0.25
    assert cv.bare_score(row, {}, {"simplification": "texture lost off edges"}) == pytest.approx(
        cv.bare_score(row, {}) + 2.0)


def test_texture_lost_off_edges_reads_a_flattened_texture_and_not_a_clean_edge():
    """The candidate reads textured tiles only: a disc's clean edge has none (not measured, 0); noise texture
    blurred reads its fine band lost."""
    from scipy.ndimage import gaussian_filter

    from bench.detector import component_variants as cv

    assert cv._texture_lost_off_edges(filters.luma_of(_disc_with_a_line(4) * 255)) == 0.0
    texture = gaussian_filter(np.random.default_rng(0).normal(0, 30, (256, 256)), 1.0) + 128
    lum = lambda a: torch.from_numpy(a)[None, None].float()  # noqa: E731
    clean, flattened = (cv._texture_lost_off_edges(lum(a)) for a in (texture, gaussian_filter(texture, 1.5)))
    assert flattened > clean + 0.5  # -1.43 -> -0.48 halvings


def test_softness_on_the_next_edges_reads_weaker_edges_blurred_where_the_strongest_5_percent_hardly_do():
    """Faint squares blurred beside one strong square kept sharp (an edge-preserving flattening's kind): the
    candidate reads the faint squares' edges (0.11 -> 0.41 -> 0.75), the shipped softness little (0.11 -> 0.22)."""
    from scipy.ndimage import gaussian_filter

    from bench.detector import component_variants as cv

    faint, strong = np.zeros((256, 256)), np.zeros((256, 256))
    for y in range(10, 250, 60):
        for x in range(10, 250, 60):
            faint[y:y + 40, x:x + 40] = 20
    strong[100:160, 100:160] = 100
    lumas = [torch.from_numpy(128 + strong + gaussian_filter(faint, s))[None, None].float() for s in (0, 1.0, 2.5)]
    shipped = [float(model.EditDamage._softness(lu, model.EditDamage._edges(filters.gauss(lu, model.RESIDUAL_SIGMA)))[0])
               for lu in lumas]
    candidate = [cv._softness_on_next_edges(lu) for lu in lumas]
    assert candidate[0] == pytest.approx(shipped[0], abs=0.01)  # all edges sharp: both alike
    assert candidate[2] > candidate[1] > candidate[0] + 0.2
    assert shipped[2] < shipped[0] + 0.15


def test_the_held_out_draws_are_refused(capsys):
    from banana100.metrics.detector.evidence import SIGNATURE_HELD_OUT
    from bench.detector import component_variants as cv

    with pytest.raises(SystemExit):
        cv.main(["--draws", str(min(SIGNATURE_HELD_OUT))])
    assert "held-out" in capsys.readouterr().err


def test_a_draws_chains_are_made_once_and_scored(tmp_path, capsys):
    from bench.detector import component_variants as cv
    from bench.detector.validate_edit_damage import SIGNATURE_PACKAGES, missing_distribution_packages

    if missing := missing_distribution_packages(*SIGNATURE_PACKAGES):
        pytest.skip(f"the draws' photographs: Debian's {', '.join(missing)} is not installed")
    args = ["--draws", "1", "--signatures", "creases", "--side", "128", "--cache", str(tmp_path / "c"),
            "--out", str(tmp_path / "r.json")]
    assert cv.main([*args, "--model-b", "0"]) == 0
    assert "(18 made)" in capsys.readouterr().out
    r = json.loads((tmp_path / "r.json").read_text())
    alone, bare = r["signatures"]["creases"]["alone"], r["signatures"]["creases"]["bare"]
    assert set(alone) == {*cv.ALONE, *cv.VARIANTS} and set(bare) == set(cv.SETTINGS)
    assert all(f["chains"] == 18 and 0 <= f["passed"] <= 18 and 0 <= f["auc_clean_vs_step10"] <= 1
               for f in (*alone.values(), *bare.values()))
    assert alone["crease"]["auc_clean_vs_step10"] > 0.5  # the creases model's own component sees it
    assert cv.main([*args, "--model-b", "1"]) == 0  # again, with damage model B's first draw
    out = capsys.readouterr().out
    assert "creases: 18 chains (0 made)" in out  # the second run reads the kept chains
    r = json.loads((tmp_path / "r.json").read_text())
    model_b = r["signatures"][cv.MODEL_B]["bare"]["shipped"]
    assert model_b["chains"] >= 20 and f"draw 1: {model_b['chains']} chains ({model_b['chains']} made)" in out
    # the units search's shipped setting is the bare score's, and the grid holds it, so its best is no worse
    search, groups = r["unit_search"], ("creases", cv.MODEL_B)
    assert all(search["shipped"][g] == r["signatures"][g]["bare"]["shipped"] for g in groups)
    weakest = lambda f: min(f[g]["auc_clean_vs_step10"] for g in groups)  # noqa: E731
    assert weakest(search["best_weakest_group"]["figures"]) >= weakest(search["shipped"])
    assert all(tuple(v) in cv.UNIT_GRID[t] for t, v in search["best_signatures_pooled"]["units"].items())
    # read as the candidate, the search's shipped setting is the bare score with that candidate in the component's place
    ceiling = r["unit_search_candidates"]
    assert ceiling["read_as"] == cv.CEILING_READ_AS == {"simplification": "texture lost off edges"}
    assert all(ceiling["shipped"][g] == r["signatures"][g]["bare"]["texture lost off edges"] for g in groups)


def test_the_told_pooled_aucs_misordered_pairs_add_up_to_what_it_loses(monkeypatch):
    from banana100.metrics.detector import relative
    from bench.detector import component_variants as cv

    monkeypatch.setattr(relative, "relative_score", lambda stats, ref: stats["v"] - ref["v"])
    rng = np.random.default_rng(0)
    chains = {f"d1/{sig}/s{i}": {k: {"v": float(v)} for k, v in zip(cv.KEPT, np.cumsum(rng.uniform(0, w, 5)), strict=True)}
              for sig, w in (("creases", 1.0), ("jpeg", 5.0)) for i in range(12)}
    shares = cv.told_misordered(chains)
    lost = 1 - cv.told_figures(chains)["auc_step1_vs_step10"]
    assert sum(sum(r.values()) for r in shares.values()) == pytest.approx(lost, abs=1e-3)  # figures rounds to 0.001
    assert shares["jpeg"]["creases"] > shares["creases"]["jpeg"]  # the larger steps' step 1 outranks the others' step 10
