"""bench/detector/lattice_tolerance.py: from how many levels a grid added once to a photograph counts told the
source, under version 12's lattice tolerance and version 11's (the figures docs/edit-damage-history.md quotes)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("skimage")


def test_a_faint_grid_counts_from_about_2_levels_now_and_from_1_5_before(tmp_path):
    from bench.detector import lattice_tolerance
    from banana100.metrics.detector import relative as rel

    out = tmp_path / "lattice.json"
    assert lattice_tolerance.main(["--out", str(out)]) == 0
    assert rel.LATTICE_TOLERANCE == 0.25  # put back after the script's version 11 rows
    rows = json.loads(out.read_text())["told_lattice_term"]
    assert set(rows) == set(lattice_tolerance.PHOTOGRAPHS)
    for row in rows.values():
        assert 0.5 < row["own_lattice_level"] < 1.0
        now, before = row["version 12"], row["version 11"]
        assert now["1 levels"] == now["1.5 levels"] == 0 < now["2 levels"] < now["2.5 levels"]
        assert before["1.5 levels"] > 0  # version 11 counted it
        assert all(before[k] >= now[k] for k in now)
