"""bench/detector/learned_combination.py: a combination is fitted on half the sources and judged on the others', and
the sum it is set beside is the detector's bare score."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from banana100.metrics.detector import model


def test_the_halves_split_sources_not_chains():
    from bench.detector import learned_combination as lc

    chains = [f"d{d}/{sig}/{src}" for d in (1, 2, 3) for sig in ("creases", "jpeg") for src in "abcdefgh"]
    fitted = lc.source_halves(chains, seed=0)
    by_source = {}
    for c, f in zip(chains, fitted, strict=True):
        by_source.setdefault(c.split("/")[-1], set()).add(bool(f))
    assert all(len(v) == 1 for v in by_source.values())  # every chain of a source on one side
    assert sum(v == {True} for v in by_source.values()) == 4
    assert not np.array_equal(fitted, lc.source_halves(chains, seed=1))


def test_a_fitted_combination_finds_the_term_that_moves_where_the_sum_is_swamped():
    """Term 0 is each source's own large clean value (a photograph's grain), term 1 the damage: the sum ranks clean
    vs step 10 near chance, a fitted logistic weighing near perfectly on the sources it did not see."""
    from bench.detector import learned_combination as lc
    from bench.detector.component_variants import KEPT

    rng = np.random.default_rng(0)
    chains = [f"d1/creases/s{i}" for i in range(80)]
    x = np.zeros((80, len(KEPT), len(model.TERMS)))
    x[:, :, 0] = rng.uniform(0, 20, (80, 1))  # constant along the chain
    x[:, :, 1] = np.array(KEPT)[None, :] * 0.1 + rng.uniform(0, 0.05, (80, len(KEPT)))
    result = lc.compare(chains, x, splits=2)["mean"]
    assert result["sum"]["creases"]["auc_clean_vs_step10"] < 0.75
    assert result["logistic"]["creases"]["auc_clean_vs_step10"] > 0.95
    assert result["logistic"]["creases"]["chains"] == 40  # the held-out half
    # read from other features (the components), the sum beside them is still the shipped score's
    both = np.concatenate([x, x ** 2], axis=-1)
    assert lc.compare(chains, both, splits=2, shipped=x.sum(-1))["mean"]["sum"] == result["sum"]
    assert lc.compare(chains, both, splits=2)["mean"]["sum"] != result["sum"]  # not the features' own sum


def test_the_sum_of_an_images_terms_is_its_bare_score():
    from bench.detector import learned_combination as lc

    yy, xx = np.mgrid[:96, :128]
    disc = np.where((yy - 48) ** 2 + (xx - 64) ** 2 < 30 ** 2, 200.0, 60.0) + np.random.default_rng(0).normal(0, 3, (96, 128))
    rgb = np.repeat(np.clip(disc, 0, 255).astype(np.uint8)[..., None], 3, axis=2)
    detector = model.EditDamage()
    with torch.inference_mode():
        score = float(detector(torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255)[0])
    row = {c: float(v[0]) for c, v in detector.last_components.items()}
    from bench.detector.component_variants import KEPT

    _, x = lc.term_array({"d1/creases/disc": {k: row for k in KEPT}})
    assert x.shape == (1, len(KEPT), len(model.TERMS))
    assert x[0, 0].sum() == pytest.approx(score)
