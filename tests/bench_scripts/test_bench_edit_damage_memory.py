"""bench/detector/bench_edit_damage_memory.py measures the peak of the tensors alive at once: the same detector
as baseline and current reads the same peak, and a detector that holds a plane more reads more."""

from __future__ import annotations

import json
import re

import pytest

from fixtures.repopaths import REPO

pytestmark = pytest.mark.integration  # two fresh Python processes a round


def test_the_same_detector_reads_the_same_peak_and_one_holding_more_reads_more(tmp_path):
    from bench.detector import bench_edit_damage_memory as bench

    model = REPO / "banana100/metrics/detector/model.py"
    heavier = tmp_path / "model.py"  # the same detector, holding a batch of 8 copies of its luma to the end
    # after the line that makes the measurement's luma, whatever its form
    heavier.write_text(re.sub(r"(\n        luma = [^\n]*\n)", r"\1        self._held = luma.repeat(1, 8, 1, 1)\n",
                              model.read_text(), count=1))
    assert "_held" in heavier.read_text()
    out = tmp_path / "memory.json"
    for baseline, low, high in ((model, 0.95, 1.05), (heavier, 0.3, 0.9)):
        assert bench.main(["--images", "2", "--side", "512", "--rounds", "1", "--baseline", str(baseline),
                           "--out", str(out)]) == 0
        r = json.loads(out.read_text())
        assert r["median_current_mb"] > 0
        assert low <= r["current_over_baseline"] <= high, r
