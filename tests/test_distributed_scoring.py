"""`torchrun --nproc_per_node 2 -m banana100 score ...`: two real CPU processes share the work.

accelerate's PartialState(cpu=True) reads torchrun's environment and gives two ranks; each
scores every other image into its own part files and rank 0 merges. (`accelerate launch --cpu
--num_processes 2` started a single process on this kind of machine, so torchrun is what the
test relies on; `accelerate launch` sets the same variables on GPU machines.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from banana100 import scoring
from runfolder import make_run_folder

TORCHRUN = Path(sys.executable).with_name("torchrun")


@pytest.mark.skipif(not TORCHRUN.exists() and shutil.which("torchrun") is None, reason="no torchrun")
def test_two_processes_split_and_merge(tmp_path):
    make_run_folder(tmp_path / "run", steps=9, size=(40, 40))  # 20 images
    out = tmp_path / "scores.parquet"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [str(TORCHRUN if TORCHRUN.exists() else shutil.which("torchrun")), "--standalone", "--nproc_per_node", "2",
           "-m", "banana100", "score", str(tmp_path / "run"), "--metrics", "piqe", "--out", str(out),
           "--device", "cpu", "--batch-size", "4"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "process 0/2" in r.stderr and "process 1/2" in r.stderr  # two ranks really ran
    table = pq.read_table(out).to_pylist()
    keys = [(row["chain_id"], row["step"], row["metric"]) for row in table]
    assert len(keys) == 20 and len(set(keys)) == 20
    assert not (tmp_path / "scores.parquet.parts").exists()

    single = tmp_path / "single.parquet"
    scoring.score_to_parquet(tmp_path / "run", ["piqe"], single, device="cpu", progress=False)
    ref = {(r["chain_id"], r["step"]): r["score"] for r in pq.read_table(single).to_pylist()}
    assert {(r["chain_id"], r["step"]): r["score"] for r in table} == pytest.approx(ref)

    # rerunning with two processes resumes: nothing left, nothing duplicated
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert pq.read_table(out).num_rows == 20
