"""bench/detector/crease_reach.py: what each crease component reads of a line at a known distance from a contour,
and where the creases damage model draws its line (a geometry check of the component against its model)."""

from __future__ import annotations

import json


def test_the_reach_of_each_crease_component_and_of_the_models_line_are_measured(tmp_path):
    from bench.detector import crease_reach

    out = tmp_path / "reach.json"
    assert crease_reach.main(["--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["components"]["clean"] == {"crease": 0.0, "crease_edges": 0.0}  # a clean contour: no crease
    assert set(r["components"]) == {"clean", *(f"{d} px" for d in crease_reach.DISTANCES)}
    near = r["components"]["4 px"]
    assert 0 < near["10 levels"]["crease"] < near["30 levels"]["crease"]  # a stronger line reads more
    assert 0 < near["10 levels"]["crease_edges"] < near["30 levels"]["crease_edges"]
    assert 2 < r["model_mask_reach_px"] < 6  # a blurred step's top 8 % of gradient: a few px either side
