"""Two real CPU processes share `banana100 score`, started by torchrun or by `accelerate launch`.

accelerate's PartialState(cpu=True) reads the launcher's environment and gives two ranks; each
scores every other image into its own part files and rank 0 merges. `accelerate launch --cpu
--num_processes 2` starts a single process (accelerate's CPU path wants MPI for more), while
`accelerate launch --multi_gpu --num_processes 2` starts two through torch's launcher, and with
`--device cpu` they run on the CPU: that is the form tested here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from banana100 import scoring
from banana100.testing.runfolder import make_run_folder

pytestmark = pytest.mark.integration  # several processes

BIN = Path(sys.executable).parent
LAUNCHERS = {
    "torchrun": [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2"],
    "accelerate": [str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                   "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0"],
}


@pytest.mark.parametrize("launcher", list(LAUNCHERS))
def test_two_processes_split_and_merge(tmp_path, launcher):
    if not Path(LAUNCHERS[launcher][0]).exists():
        pytest.skip(f"no {launcher} beside {sys.executable}")
    make_run_folder(tmp_path / "run", steps=9, size=(96, 96))  # 20 images, at PIQE's minimum size
    out = tmp_path / "scores.parquet"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = LAUNCHERS[launcher] + ["-m", "banana100", "score", str(tmp_path / "run"), "--metrics", "piqe",
                                 "--out", str(out), "--device", "cpu", "--batch-size", "4"]
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
