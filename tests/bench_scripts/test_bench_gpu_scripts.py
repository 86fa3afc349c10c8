"""Every bench/gpu_* script runs on CPU, end to end, at tiny sizes: they cannot rot unseen again.

bench/gpu/gpu_check.py stopped at import for weeks (issue 30) because nothing ran it without a GPU.
Each script here is run as the lead runs it on a device machine (a subprocess from the
repository's root), with CPU flags and tiny sizes; a new bench/gpu_* script needs its line below.
Timings are printed by the scripts, never checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fixtures.repopaths import PARAMS, REPO

pytestmark = pytest.mark.integration

# script -> (its CPU smoke flags, what it needs beyond the library)
SMOKE = {
    "gpu_check.py": (["--device", "cpu", "--metrics", "piqe,cnniqa,edit_damage", "--sizes", "128,96", "--n", "2",
                      "--batch-size", "1", "--vs-cpu", "on", "--gpus", "2", "--max-seconds", "120"], ("pyiqa",)),
    "gpu_flat_check.py": (["--device", "cpu", "--quick", "--params", str(PARAMS)], ("pyiqa", "params")),
    "gpu_vlm_check.py": (["--device", "cpu", "--tiny", "--sides", "224", "--batch-sizes", "1", "--n", "1"],
                         ("transformers",)),
}


# smoke-run in the test file of what they measure
ELSEWHERE = {"gpu_precision_check.py": "tests/metrics/test_precision.py::test_the_gpu_precision_script_runs_on_cpu"}


def test_every_gpu_script_has_a_smoke_run():
    assert sorted(p.name for p in (REPO / "bench" / "gpu").glob("gpu_*.py")) == sorted([*SMOKE, *ELSEWHERE])
    for where in ELSEWHERE.values():
        path, test = where.split("::")
        assert f"def {test}(" in (REPO / path).read_text(), where


def _run(script: str, tmp_path, out_flag: list[str]) -> subprocess.CompletedProcess:
    flags, needs = SMOKE[script]
    for need in needs:
        if need == "params":
            if not (PARAMS / "niqe_modelparameters.mat").exists():
                pytest.skip(f"needs the parameter files in {PARAMS} (niqe_modelparameters.mat and the others)")
        else:
            pytest.importorskip(need)
    scratch = tmp_path / "scratch"  # the script's temporary files: nothing may be left there
    scratch.mkdir()
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", TMPDIR=str(scratch))
    if PARAMS.is_dir():
        env["BANANA100_WEIGHTS"] = str(PARAMS)
    else:
        env.pop("BANANA100_WEIGHTS", None)
    # as a file, from another folder: how a lent GPU machine's shell may run it (`python -m` is covered by
    # gpu_session.sh below)
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "gpu" / script), *flags, *out_flag], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not [p.name for p in scratch.iterdir() if p.name.startswith("gpu-check-")]  # built models' copies
    return proc


def test_gpu_check_runs_on_cpu(tmp_path):
    proc = _run("gpu_check.py", tmp_path, ["--out", str(tmp_path / "out")])
    doc = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert (tmp_path / "out" / "gpu_check.md").read_text() in proc.stdout
    rows = {(r["metric"], r["side"]): r for r in doc["rows"]}
    assert set(rows) == {(m, s) for m in ("piqe", "cnniqa", "edit_damage") for s in (128, 96)}
    for (metric, side), r in rows.items():
        assert "error" not in r and "skipped" not in r, r
        assert r["engine_img_s"] > 0 and r["model_img_s"] > 0 and r["upload_img_s"] > 0, r
    # pyiqa's own loop beside the engine, same images: pyiqa has PIQE and CNNIQA, not edit_damage
    for metric in ("piqe", "cnniqa"):
        r = rows[(metric, 96)]
        assert r["pyiqa_img_s"] > 0 and r["pyiqa_images"] == 2
        assert r["max_abs_vs_pyiqa"] < 1e-3 and r["vs_pyiqa_cpu"] < 1e-3, r
    assert "pyiqa_img_s" not in rows[("edit_damage", 128)]
    assert rows[("cnniqa", 128)]["weights"] == "random"  # no CNNIQA checkpoint here: random weights
    p = doc["projection"]
    assert p["side"] == 128 and set(p["hours_per_metric"]) == {"piqe", "cnniqa", "edit_damage"}
    assert p["hours_by_devices"]["2"] == pytest.approx(p["hours_one_device"] / 2, abs=0.01)
    assert p["pyiqa_loop_metrics"] == ["cnniqa", "piqe"]


def test_gpu_flat_check_runs_on_cpu(tmp_path):
    _run("gpu_flat_check.py", tmp_path, ["--out", str(tmp_path / "flat.json")])
    assert json.loads((tmp_path / "flat.json").read_text())


def test_gpu_vlm_check_runs_on_cpu(tmp_path):
    _run("gpu_vlm_check.py", tmp_path, ["--out", str(tmp_path / "vlm.json")])
    assert json.loads((tmp_path / "vlm.json").read_text())


def test_the_gpu_session_script_runs_its_steps_on_cpu(tmp_path):
    """bench/gpu_session.sh, the one script a short GPU lease runs, with small arguments on CPU:
    every step ends with status 0 and writes its results (a step that fails is logged, not fatal,
    so the summary is what tells)."""
    pytest.importorskip("pyiqa")
    # the detector's step times it against native NIQE, whose parameter file is in ../shared
    detector = ["edit_damage_cost"] if (PARAMS / "niqe_modelparameters.mat").is_file() else []
    env = dict(os.environ, OUT=str(tmp_path), GPU_SESSION_DEVICE="cpu", PYTHON=sys.executable,
               GPU_SESSION_STEPS=" ".join(["env", "engine_overhead", "precision", "gpu_check", "gpu_check_fast", *detector]),
               GPU_OVERHEAD_ARGS="--n 2 --batch-size 1 --side 96 --rounds 1 --metrics piqe",
               GPU_PRECISION_ARGS="--side 64 --n 1 --metrics piqe --deep cnniqa",
               GPU_CHECK_ARGS="--metrics piqe --sizes 96 --n 2 --max-seconds 30 --vs-cpu off --gpus 1,2",
               GPU_CHECK_FAST_ARGS="--metrics cnniqa --sizes 96 --n 2 --max-seconds 30 --vs-cpu off --gpus 1",
               GPU_DETECTOR_ARGS="--sizes 96 --batches 2 --images 2 --rounds 1")
    proc = subprocess.run(["bash", str(REPO / "bench" / "gpu_session.sh")], env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = (tmp_path / "summary.txt").read_text().split("\n")
    assert [line.split(" rc=")[0] for line in summary if line] == ["env", "engine_overhead", "precision", "gpu_check",
                                                                                 "gpu_check_fast", *detector]
    assert all(" rc=0 " in line for line in summary if line), summary
    assert (tmp_path / "results.tar.gz").is_file() and (tmp_path / "r" / "precision.json").is_file()
    if detector:
        cost = json.loads((tmp_path / "r" / "edit_damage_cost.json").read_text())
        assert cost["rows"][0]["size"] == 96 and cost["rows"][0]["ratio_cpu"] > 0
    groups = {}  # the two groups that each fit one device call
    for group in ("scoring", "models"):
        listed = subprocess.run(["bash", "-c", f"GPU_SESSION_STEPS={group}; source <(sed -n '/^steps=/,/^esac/p' "
                                 f"{REPO / 'bench' / 'gpu_session.sh'}); echo $steps"], capture_output=True, text=True)
        groups[group] = listed.stdout.split()
    assert groups["scoring"][-1] == "gpu_check" and groups["models"][1:] == ["gpu_check_fast", "cnniqa_maniqa", "edit_damage_cost", "vlm",
                                                                            "editors"]
    fast = json.loads((tmp_path / "r" / "gpu_check_fast" / "gpu_check.json").read_text())
    assert fast["args"]["precision"] == "fast" and fast["rows"][0]["engine_img_s"] > 0, fast["rows"]
    overhead = json.loads((tmp_path / "r" / "engine_overhead.json").read_text())
    assert overhead["rows"][0]["batch_size"] == 1 and overhead["rows"][0]["images"] == 2
