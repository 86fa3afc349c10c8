"""ruff, with the rules pyproject.toml selects (F, E9, B905), finds nothing in the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.repopaths import REPO


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (`bash setup.sh --dev` installs it)")
    proc = subprocess.run([ruff, "check", "--no-cache", "banana100", "tests", "bench", "metrics", "space",
                           "dataset_script", "docs"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
