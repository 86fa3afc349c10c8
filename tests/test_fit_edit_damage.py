"""bench/fit_edit_damage.py's pairs: what the fit counts as a wrong order (no fit is run here)."""

from __future__ import annotations

import sys

import pytest

from repopaths import REPO

sys.path.insert(0, str(REPO / "bench"))
fit = pytest.importorskip("fit_edit_damage", reason="bench/fit_edit_damage.py needs skimage and bench/benchtools")


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
