"""The main job end to end, as a user runs it: real subprocesses, tiny settings."""

import os
import subprocess
import sys

import pytest

from conftest import IQA_PARAMS, REPO


def run_cli(*args, env_extra=None, cwd=None):
    env = {**os.environ, "BANANA100_WEIGHTS": str(IQA_PARAMS), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "banana100", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or REPO, timeout=600)


def test_demo_end_to_end(tmp_path, iqa_params):
    out = tmp_path / "demo"
    proc = run_cli("demo", "--out", str(out), "--steps", "20", "--chains", "2")
    assert proc.returncode == 0, proc.stderr
    report = out / "report" / "report.md"
    assert f"report: {report.resolve()}" in proc.stdout
    text = report.read_text()
    for metric in ("piqe", "niqe", "brisque"):
        assert f"| {metric} | lower better | 2 |" in text
    assert (out / "report" / "sensitivity.png").stat().st_size > 10_000
    assert (out / "report" / "chain.png").is_file()

    import datasets

    ds = datasets.load_dataset(str(out / "dataset"), split="train")
    assert ds.num_rows == 2 * 21

    # Rerunning resumes: nothing is regenerated or rescored, the report is the same.
    again = run_cli("demo", "--out", str(out), "--steps", "20", "--chains", "2")
    assert again.returncode == 0, again.stderr
    assert report.read_text() == text


def test_demo_without_parameter_files_uses_piqe_and_says_why(tmp_path):
    out = tmp_path / "demo"
    proc = run_cli("demo", "--out", str(out), "--steps", "20", "--chains", "1",
                   env_extra={"BANANA100_WEIGHTS": str(tmp_path / "none"), "TORCH_HOME": str(tmp_path / "torch"),
                              "HF_HOME": str(tmp_path / "hf")})
    assert proc.returncode == 0, proc.stderr
    assert "skipping niqe: niqe_modelparameters.mat not found" in proc.stderr
    assert "| piqe |" in (out / "report" / "report.md").read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        (["score", "no/such/folder", "--out", "x.parquet"], "no/such/folder: no such folder"),
        (["score", ".", "--metrics", "nosuchmetric", "--out", "x.parquet"], "unknown metric 'nosuchmetric'"),
        (["report", "absent.parquet", "--out", "r"], "absent.parquet: no such scores file"),
        (["generate", "--sources", "no/such/dir", "--steps", "2", "--out", "r"], "no/such/dir"),
    ],
)
def test_cli_errors_are_one_clear_line(tmp_path, args, message):
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
