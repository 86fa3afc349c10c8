"""The native metrics' scores and flat shares, bit for bit, against the stored snapshot
(tests/fixtures/data/native_scores_snapshot.json, written by `python tests/fixtures/regenerate_reference_data.py
snapshot`). A speed change or a move of code must keep every one of them; a change meant to move
a score regenerates the file and says why in its commit.

The float results follow the CPU's kernels, so the file holds one snapshot per CPU platform
(`referencedata.cpu_platform()`): bit for bit against this CPU's; on a CPU with none, within
CROSS_CPU of a stored one (the spread measured between two CPUs), and the skip-free check says so."""

from __future__ import annotations


import pytest
from fixtures.referencedata import cpu_platform
from fixtures.regenerate_reference_data import FILES, SNAPSHOT, native_snapshot, snapshot_platforms

PLATFORMS = snapshot_platforms()
# between the first snapshot's CPU and an AMD EPYC (AVX512), same code and torch: scores moved by
# up to 1.4e-3 relative (brisque/0), flat shares by up to 7.6e-6 (a few windows); twice that here
CROSS_CPU = {"scores": 3e-3, "flat_share": 2e-5}


def _close(a: dict, b: dict) -> bool:
    for field, tol in CROSS_CPU.items():
        for x, y in zip(a[field], b[field], strict=True):
            if (x is None) != (y is None):
                return False
            if x is not None and abs(x - y) > (tol * max(abs(y), 1.0) if field == "scores" else tol):
                return False
    return True


@pytest.mark.parametrize("metric", [pytest.param(m, marks=pytest.mark.integration) if m == "ilniqe" else m
                                    for m in FILES])
def test_native_scores_equal_the_stored_snapshot(iqa_params, metric):
    now = native_snapshot(iqa_params, metrics=(metric,))
    here = cpu_platform()
    for platform, entries in ([(here, PLATFORMS[here])] if here in PLATFORMS else PLATFORMS.items()):
        stored = {k: v for k, v in entries.items() if k.startswith(f"{metric}/")}
        assert stored, f"no {metric} entries for {platform} in {SNAPSHOT}"
        assert set(now) == set(stored)
        if platform == here:  # this CPU's own snapshot: bit for bit
            differ = {k: (stored[k], now[k]) for k in now if now[k] != stored[k]}
            assert not differ, f"{len(differ)} of {len(now)} entries moved on {here}: {differ}"
            return
        if all(_close(now[k], stored[k]) for k in now):
            return  # no snapshot of this CPU: within the spread between CPUs of another's
    pytest.fail(f"{metric}: no snapshot for this CPU ({here}) and further than {CROSS_CPU} from every stored one "
                f"({', '.join(PLATFORMS)}); `python tests/fixtures/regenerate_reference_data.py snapshot` adds this CPU's "
                "once the change is known to be right")
