"""bench/gpu/gpu_vlm_check.py on CPU with the tiny model, as bench/gpu/gpu_check.sh runs it there: the GPU
measurement of VisualQuality-R1 (issue 31) cannot rot unnoticed between GPU loans."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest

from fixtures.repopaths import REPO

pytest.importorskip("transformers")


@pytest.mark.integration
def test_gpu_vlm_check_runs_on_cpu_as_gpu_check_sh_calls_it(tmp_path):
    sh = (REPO / "bench" / "gpu" / "gpu_check.sh").read_text()
    tiny = shlex.split(re.search(r"tiny=\((--tiny[^)]*)\)", sh).group(1))  # the CPU arguments gpu_check.sh passes
    out = tmp_path / "vlm.json"
    cmd = [sys.executable, "-m", "bench.gpu.gpu_vlm_check", "--device", "cpu", *tiny,
           "--max-new-tokens", "4", "--budget-s", "1e9", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    measured = {(r["path"], r["batch"]) for r in result["rows"]}
    assert measured == {("loop", "4"), ("batched", "4"), ("batched", "auto"), ("loop", "1"), ("batched", "1")}
    assert not result["skipped"]
    [first, *per_batch] = result["agreement"]
    # float32 on CPU: the two attention paths agree (issue 31: <= 1e-5)
    assert first["vision_max_abs_diff"] <= 1e-5 and first["logits_max_abs_diff"] <= 1e-5
    assert all(a["answers_identical"] == 1.0 for a in per_batch)
    [vision] = result["vision"]
    assert vision["loop_s"] > 0 and vision["batched_s"] > 0
    assert result["bytes_per_token_estimate"] > 0 and result["syncs_per_decoded_token"] is None  # CPU: no CUDA sync mode
