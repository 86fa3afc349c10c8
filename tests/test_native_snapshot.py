"""The native metrics' scores and flat shares, bit for bit, against the stored snapshot
(tests/data/native_scores_snapshot.json, written by `python tests/regenerate_reference_data.py
snapshot`). A speed change or a move of code must keep every one of them; a change meant to move
a score regenerates the file and says why in its commit."""

from __future__ import annotations

import json

import pytest
from regenerate_reference_data import FILES, SNAPSHOT, native_snapshot

STORED = json.loads(SNAPSHOT.read_text())


@pytest.mark.parametrize("metric", [pytest.param(m, marks=pytest.mark.integration) if m == "ilniqe" else m
                                    for m in FILES])
def test_native_scores_equal_the_stored_snapshot(iqa_params, metric):
    now = native_snapshot(iqa_params, metrics=(metric,))
    stored = {k: v for k, v in STORED.items() if k.startswith(f"{metric}/")}
    assert stored, f"no {metric} entries in {SNAPSHOT}"
    assert set(now) == set(stored)
    differ = {k: (stored[k], now[k]) for k in now if now[k] != stored[k]}
    assert not differ, f"{len(differ)} of {len(now)} entries moved: {differ}"
