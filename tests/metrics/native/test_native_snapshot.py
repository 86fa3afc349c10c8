"""The native metrics' scores and flat shares, bit for bit, against the stored snapshot
(tests/fixtures/data/native_scores_snapshot.json, written by `python tests/fixtures/regenerate_reference_data.py
snapshot`). A speed change or a move of code must keep every one of them; a change meant to move
a score regenerates the file and says why in its commit.

The float results follow the CPU's kernels, so the file holds one snapshot per CPU model
(`referencedata.cpu_model_platform()`): bit for bit against this CPU model's; on another model with the same
kernels (`referencedata.cpu_platform()`: vendor, torch's CPU capability and version), within SAME_KERNELS of
its entry; on a CPU with neither, within CROSS_CPU of a stored one (the spread measured between two CPUs)."""

from __future__ import annotations


import pytest
from fixtures.referencedata import cpu_model_platform, cpu_platform
from fixtures.regenerate_reference_data import FILES, SNAPSHOT, native_snapshot, snapshot_platforms

PLATFORMS = snapshot_platforms()
# between the first snapshot's CPU and an AMD EPYC (AVX512), same code and torch: scores moved by
# up to 1.4e-3 relative (brisque/0), flat shares by up to 7.6e-6 (a few windows); twice that here
CROSS_CPU = {"scores": 3e-3, "flat_share": 2e-5}
# the same kernels on another model of CPU: an AMD EPYC of family 26 read NIQE up to 5.7e-13 (relative) from the
# entry stored before models were told apart, flat shares the same; a change of code that moves a score moves it more
SAME_KERNELS = {"scores": 1e-9, "flat_share": 1e-12}


def _close(a: dict, b: dict, tolerance: dict) -> bool:
    for field, tol in tolerance.items():
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

    def entries(platform):
        stored = {k: v for k, v in PLATFORMS[platform].items() if k.startswith(f"{metric}/")}
        assert stored, f"no {metric} entries for {platform} in {SNAPSHOT}"
        assert set(now) == set(stored)
        return stored

    here = cpu_model_platform()
    if here in PLATFORMS:  # this CPU model's own snapshot: bit for bit
        stored = entries(here)
        differ = {k: (stored[k], now[k]) for k in now if now[k] != stored[k]}
        assert not differ, f"{len(differ)} of {len(now)} entries moved on {here}: {differ}"
        return
    kernels = cpu_platform()
    same = [p for p in PLATFORMS if p == kernels or p.startswith(kernels + " (")]
    for tolerance, platforms in ((SAME_KERNELS, same), (CROSS_CPU, [] if same else list(PLATFORMS))):
        for platform in platforms:
            stored = entries(platform)
            if all(_close(now[k], stored[k], tolerance) for k in now):
                return
    pytest.fail(f"{metric}: no snapshot for this CPU model ({here}) and further than "
                f"{SAME_KERNELS if same else CROSS_CPU} from every stored one of "
                f"{', '.join(same or PLATFORMS)}; `python tests/fixtures/regenerate_reference_data.py snapshot` adds "
                "this CPU model's once the change is known to be right")
