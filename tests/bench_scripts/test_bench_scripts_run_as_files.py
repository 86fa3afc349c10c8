"""Every bench script that imports `bench` runs as a file too (`python bench/gpu/gpu_check.py`), not only
with `python -m` from the repository root: a file run puts its own folder on the path, not the root."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fixtures.repopaths import REPO

pytestmark = pytest.mark.integration  # a Python process per script (~3 s each)

SCRIPTS = sorted(p for p in (REPO / "bench").rglob("*.py")
                 if p.parent != REPO / "bench" and "from bench" in p.read_text() and "__main__" in p.read_text())


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO / "bench")))
def test_a_bench_script_runs_as_a_file_from_another_folder(tmp_path, script):
    proc = subprocess.run([sys.executable, str(script), "--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout
