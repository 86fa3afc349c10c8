"""The bench scripts run inside the tests: whatever they write to a scratch folder is gone when they exit.
Before, each run of the GPU precision check's CPU part left 92 MB of untrained checkpoints in /tmp, and each
side-by-side bench a copy of its baseline module; a few hundred test runs filled the disk."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from fixtures.repopaths import REPO


def test_a_scratch_folder_is_removed_when_the_process_exits(tmp_path):
    code = ("from bench.benchtools import scratch_dir\n"
            "folder = scratch_dir('scratch-test-')\n"
            "(folder / 'sub').mkdir()\n"
            "(folder / 'sub' / 'weights.pt').write_bytes(b'0' * 1000)\n"
            "print(folder)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = Path(proc.stdout.strip())
    assert folder.name.startswith("scratch-test-")
    assert not folder.exists()


def test_every_bench_script_that_makes_a_temporary_folder_removes_it():
    leaking = [str(p.relative_to(REPO)) for p in sorted((REPO / "bench").rglob("*.py"))
               if re.search(r"tempfile\.mkdtemp\(", p.read_text()) and "rmtree" not in p.read_text()]
    assert not leaking, f"tempfile.mkdtemp without a removal (use bench.benchtools.scratch_dir): {leaking}"
