"""bench/detector/baseline.py: a side-by-side bench's baseline runs its own commit's detector, filters included."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import torch

from fixtures.repopaths import REPO

MOVED = "76a027a"  # the commit that moved the image-processing steps from model.py to filters.py
BEFORE = "bed4d06"  # its parent's parent: model.py held them


def _have(commit: str) -> bool:
    return subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not (_have(MOVED) and _have(BEFORE)), reason=f"needs the git history of commits {BEFORE} and {MOVED}")
def test_a_baseline_runs_its_commits_filters_not_todays():
    from bench.detector.baseline import detector_as_of
    from banana100.metrics.detector import filters
    from banana100.metrics.detector import model as today

    then = detector_as_of(MOVED, "edit_damage_moved")
    # the baseline's model reads the filters of its commit (a module of its own), never today's
    assert then.gauss is not filters.gauss and then.gauss.__module__ == "edit_damage_moved_filters"
    assert then.luma_of.__module__ == "edit_damage_moved_filters"
    before = detector_as_of(BEFORE, "edit_damage_before")  # model.py held its own
    assert before.gauss.__module__ == "edit_damage_before"
    # the steps were moved verbatim: all three read an image alike
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.integers(0, 256, (1, 3, 96, 128)).astype(np.float32) / 255)
    scores = [float(m.EditDamage()(x)) for m in (today, then, before)]
    assert scores[0] == scores[1] == scores[2]
