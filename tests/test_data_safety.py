"""Issue 20, "nothing lost, nothing doubled": a user's folder, a killed merge, two runs at once,
a manifest that lies, one-line errors. Each test fails on the code before the issue."""

from __future__ import annotations

import errno
import json
import builtins
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

import banana100.fileio as fileio
import banana100.scoring as scoring
from banana100.chains.manifest import MANIFEST_NAME, read_manifest, sha256_bytes
from banana100.cli import main
from banana100.dataset.build import build_dataset
from banana100.dataset.verify import verify_dataset
from banana100.errors import Banana100Error, DatasetError, ImportChainsError, ManifestError, UsageError
from banana100.testing.runfolder import make_run_folder

from fixtures.repopaths import REPO


def _score(run, out, **kw):
    return scoring.score_to_parquet(run, ["piqe"], out, device="cpu", progress=False, **kw)


def _keys(path):
    rows = pq.read_table(path, columns=["chain_id", "step", "metric"]).to_pylist()
    return [(r["chain_id"], r["step"], r["metric"]) for r in rows]


def _rewrite_manifest(run: Path, change) -> None:
    records = [change(dict(r)) for r in read_manifest(run)]
    (run / MANIFEST_NAME).write_text("".join(json.dumps(r) + "\n" for r in records))


def _one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith(f"banana100 {command}: error: "), err
    return err[-1]


# ------------------------------------------------------------------ build-dataset into an existing folder

@pytest.mark.integration
def test_rebuild_keeps_what_the_library_did_not_write(tmp_path):
    make_run_folder(tmp_path / "run", steps=3)
    ds = build_dataset([tmp_path / "run"], tmp_path / "ds")
    (ds / ".git").mkdir()  # a clone of the Hub dataset repo
    (ds / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ds / ".gitattributes").write_text("*.parquet filter=lfs\n")
    (ds / "NOTES.md").write_text("mine")
    old_card = (ds / "README.md").read_text()
    make_run_folder(tmp_path / "run2", sources=("c",), steps=3, seed=1)
    build_dataset([tmp_path / "run", tmp_path / "run2"], ds)
    assert (ds / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (ds / ".gitattributes").read_text() == "*.parquet filter=lfs\n"
    assert (ds / "NOTES.md").read_text() == "mine"
    assert (ds / "README.md").read_text() != old_card  # the build's own files were replaced
    report = verify_dataset(ds)
    assert report.ok and report.chains == 3, [str(p) for p in report.problems]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "run", "run2"]  # no work folder, no lock left


def test_a_user_file_inside_the_data_folder_is_refused_and_nothing_moves(tmp_path, capsys):
    make_run_folder(tmp_path / "run", steps=2)
    ds = build_dataset([tmp_path / "run"], tmp_path / "ds")
    (ds / "data" / "keep.txt").write_text("mine")
    before = sorted(str(p.relative_to(ds)) for p in ds.rglob("*"))
    assert main(["build-dataset", str(tmp_path / "run"), "--out", str(ds)]) == 1
    line = _one_line_error(capsys, "build-dataset")
    assert str(ds / "data" / "keep.txt") in line and "not written by build-dataset" in line
    assert sorted(str(p.relative_to(ds)) for p in ds.rglob("*")) == before
    assert (ds / "data" / "keep.txt").read_text() == "mine"


# ------------------------------------------------------------------ score: the merge and a kill

@pytest.mark.integration
def test_rerun_after_a_kill_between_merge_and_parts_removal_doubles_nothing(tmp_path, monkeypatch, capsys):
    make_run_folder(tmp_path / "run", steps=3, size=(96, 96))  # 8 images
    out = tmp_path / "s.parquet"
    # the state a kill leaves right after the merged file is renamed into place: both it and the parts
    monkeypatch.setattr(scoring.store.shutil, "rmtree", lambda *a, **k: None)
    _score(tmp_path / "run", out, chunk_size=3)
    assert out.is_file() and list((tmp_path / "s.parquet.parts").glob("part-*.parquet"))
    monkeypatch.undo()
    _score(tmp_path / "run", out, chunk_size=3)  # the rerun
    keys = _keys(out)
    assert len(keys) == len(set(keys)) == 8
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0


def test_a_file_merged_by_an_older_version_with_its_parts_left_is_read_once(tmp_path):
    make_run_folder(tmp_path / "run", steps=3, size=(96, 96))
    out = tmp_path / "s.parquet"
    _score(tmp_path / "run", out, chunk_size=3)
    parts = tmp_path / "s.parquet.parts"
    parts.mkdir()
    table = pq.read_table(out)
    pq.write_table(table.replace_schema_metadata({}), out)  # no record of merged parts (older version)
    pq.write_table(table.slice(0, 3), parts / "part-000000.parquet")  # its parts, left by the kill
    assert len(scoring.read_scores(out)) == 8
    _score(tmp_path / "run", out)
    assert len(_keys(out)) == len(set(_keys(out))) == 8


def test_an_irreconcilable_state_is_an_error_naming_the_files(tmp_path):
    make_run_folder(tmp_path / "run", steps=3, size=(96, 96))
    out = tmp_path / "s.parquet"
    _score(tmp_path / "run", out, chunk_size=3)
    parts = tmp_path / "s.parquet.parts"
    parts.mkdir()
    stray = parts / "part-000000-feedfeedfeed.parquet"  # not merged into `out`, yet holding its rows
    pq.write_table(pq.read_table(out).slice(2, 2), stray)
    with pytest.raises(DatasetError) as e:
        _score(tmp_path / "run", out)
    assert str(out) in str(e.value) and str(stray) in str(e.value)


@pytest.mark.integration
def test_two_score_processes_on_one_out_the_second_refuses(tmp_path, capsys):
    make_run_folder(tmp_path / "run", steps=1, size=(96, 96))
    out = tmp_path / "s.parquet"
    holder = textwrap.dedent(f"""
        import sys
        import banana100.scoring as scoring
        def hold(*a, **k):
            print("locked", flush=True)
            sys.stdin.readline()
        scoring.ScoreRun._score = hold
        scoring.score_to_parquet({str(tmp_path / 'run')!r}, ["piqe"], {str(out)!r}, device="cpu", progress=False)
    """)
    proc = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=REPO)
    try:
        assert proc.stdout.readline().strip() == "locked"  # an event, not a sleep: the first run holds the lock
        assert main(["score", str(tmp_path / "run"), "--metrics", "piqe", "--out", str(out), "--device", "cpu"]) == 1
        line = _one_line_error(capsys, "score")
        assert "in use by another `banana100 score`" in line and str(out) in line
    finally:
        proc.communicate("\n", timeout=120)
    assert proc.returncode == 0
    assert not out.exists()  # the refused run wrote nothing


def test_two_builds_into_one_folder_the_second_refuses(tmp_path, monkeypatch):
    import banana100.dataset.build as build

    make_run_folder(tmp_path / "run", steps=1)
    real = build.build_locked
    seen = {}

    def nested(*args):
        with pytest.raises(Banana100Error, match="in use by another `banana100 build-dataset`") as e:
            build_dataset([tmp_path / "run"], tmp_path / "ds")
        seen["error"] = str(e.value)
        return real(*args)

    monkeypatch.setattr(build, "build_locked", nested)
    build_dataset([tmp_path / "run"], tmp_path / "ds")
    assert str(tmp_path / "ds") in seen["error"]
    monkeypatch.undo()
    assert verify_dataset(tmp_path / "ds").ok


# ------------------------------------------------------------------ a manifest that lies

def test_score_does_not_score_an_image_changed_on_disk(tmp_path):
    records = make_run_folder(tmp_path / "run", steps=2, size=(96, 96))
    changed = tmp_path / "run" / records[1]["image"]
    Image.fromarray(np.full((96, 96, 3), 90, np.uint8)).save(changed)
    out = _score(tmp_path / "run", tmp_path / "s.parquet")
    rows = {(r["chain_id"], r["step"]): r for r in pq.read_table(out).to_pylist()}
    bad = rows[(records[1]["chain_id"], records[1]["step"])]
    assert np.isnan(bad["score"]) and str(changed) in bad["error"] and "sha256" in bad["error"]
    assert sum(r["error"] is None for r in rows.values()) == len(records) - 1


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_score_and_build_refuse_a_path_outside_the_run_folder(tmp_path, how):
    records = make_run_folder(tmp_path / "run", steps=1, size=(96, 96))
    outside = tmp_path / "secret.png"
    outside.write_bytes((tmp_path / "run" / records[0]["image"]).read_bytes())
    if how == "symlink":
        link = tmp_path / "run" / records[0]["image"]
        link.unlink()
        link.symlink_to(outside)
    else:
        target = "../secret.png" if how == "dotdot" else str(outside)
        _rewrite_manifest(tmp_path / "run", lambda r: {**r, "image": target} if r["step"] == 0 and
                          r["chain_id"] == records[0]["chain_id"] else r)
    with pytest.raises(ManifestError, match="leaves the run folder|leads out of the run folder"):
        _score(tmp_path / "run", tmp_path / "s.parquet")
    with pytest.raises(ManifestError, match="leaves the run folder|leads out of the run folder"):
        build_dataset([tmp_path / "run"], tmp_path / "ds")
    assert not (tmp_path / "s.parquet").exists() and not (tmp_path / "ds").exists()


def _release(folder: Path, steps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for step in range(steps + 1):
        p = folder / "moss" / f"step_{step:03d}.png"
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(p)


def test_import_chains_refuses_to_splice_into_chains_it_did_not_make(tmp_path, capsys):
    from banana100.chains.importer import import_chains

    _release(tmp_path / "a", steps=3, seed=1)
    _release(tmp_path / "b", steps=6, seed=2)  # other images, same chain names, more steps
    import_chains(tmp_path / "a", "{chain}/step_{step:03d}.png", tmp_path / "run")
    assert import_chains(tmp_path / "a", "{chain}/step_{step:03d}.png", tmp_path / "run").imported == 0  # resumes
    before = (tmp_path / "run" / MANIFEST_NAME).read_bytes()
    assert main(["import-chains", str(tmp_path / "b"), "--pattern", "{chain}/step_{step:03d}.png",
                 "--out", str(tmp_path / "run")]) == 1
    line = _one_line_error(capsys, "import-chains")
    assert "splice" in line and str(tmp_path / "b") in line
    assert (tmp_path / "run" / MANIFEST_NAME).read_bytes() == before
    # a generate run folder is not imported into either
    make_run_folder(tmp_path / "gen", sources=("moss",), setting="replicate", steps=1)
    (tmp_path / "gen" / "run.json").write_text("{}")
    with pytest.raises(ImportChainsError, match="splice"):
        import_chains(tmp_path / "a", "{source}/step_{step:03d}.png", tmp_path / "gen")


def test_import_chains_refuses_a_truncated_image(tmp_path):
    from banana100.chains.importer import import_chains

    _release(tmp_path / "a", steps=2, seed=1)
    big = tmp_path / "a" / "moss" / "step_002.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(big)
    big.write_bytes(big.read_bytes()[: big.stat().st_size // 2])
    with pytest.raises(ImportChainsError, match="step_002.png: not an image that decodes"):
        import_chains(tmp_path / "a", "{chain}/step_{step:03d}.png", tmp_path / "run")


# ------------------------------------------------------------------ one line, the documented status

def _scores_file(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


ROW = {"chain_id": "a", "step": 1, "metric": "piqe", "score": 1.0, "lower_better": True}


@pytest.mark.parametrize("debug", ["", "1"])
@pytest.mark.parametrize("case,expected", [
    ("empty", "0 rows"), ("doubled", "repeat a (chain, step, metric)"), ("text", "not numeric"),
])
def test_report_on_bad_scores_files_is_one_line(tmp_path, capsys, monkeypatch, case, expected, debug):
    import pyarrow as pa

    monkeypatch.setenv("BANANA100_DEBUG", debug)
    path = tmp_path / "s.parquet"
    if case == "empty":
        pq.write_table(scoring.SCORES_SCHEMA.empty_table(), path)
    elif case == "doubled":
        _scores_file(path, [ROW, ROW])
    else:
        pq.write_table(pa.Table.from_pylist([{**ROW, "score": "high"}]), path)
    assert main(["report", str(path), "--out", str(tmp_path / "r")]) == 1  # the same status with debug
    line = _one_line_error(capsys, "report")
    assert expected in line and str(path) in line


@pytest.mark.parametrize("device", ["tpu", "", "cuda:9", "cuda"])
def test_a_bad_device_is_one_line_with_the_usage_status(tmp_path, capsys, monkeypatch, device):
    import torch

    if device.startswith("cuda") and torch.cuda.device_count() > 9:
        pytest.skip("this machine has a cuda:9")
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("cuda is a good device on this machine")
    make_run_folder(tmp_path / "run", steps=1, size=(96, 96))
    for debug in ("", "1"):
        monkeypatch.setenv("BANANA100_DEBUG", debug)
        assert main(["score", str(tmp_path / "run"), "--metrics", "piqe", "--out", str(tmp_path / "s.parquet"),
                     "--device", device]) == 2
        line = _one_line_error(capsys, "score")
        assert f"device {device!r}" in line


@pytest.mark.integration
def test_compute_with_a_bad_device_raises_a_usage_error():
    import evaluate

    piqe = evaluate.load(str(REPO / "metrics" / "piqe"))
    image = np.random.default_rng(0).integers(0, 256, (96, 96, 3), dtype=np.uint8)
    for device in ("tpu", "", "cuda:99"):
        with pytest.raises(UsageError, match="device"):
            piqe.compute(images=[image], device=device)
    assert piqe.compute(images=[image], device="cpu")["metric"] == "piqe"


def test_debug_keeps_the_exit_status_and_adds_the_traceback(tmp_path, capsys, monkeypatch):
    from banana100.errors import RunStopped

    def refuse(args):
        raise RunStopped("the service refused the API key (401)")

    from banana100.cli import report

    monkeypatch.setattr(report, "run", refuse)
    for debug, traceback in (("", False), ("1", True)):
        monkeypatch.setenv("BANANA100_DEBUG", debug)
        assert main(["report", str(tmp_path / "x.parquet"), "--out", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert ("Traceback (most recent call last)" in err) == traceback
        assert err.strip().splitlines()[-1] == "banana100 report: error: the service refused the API key (401)"


# ------------------------------------------------------------------ FIFO, full disk, lost manifest, verify

def _with_deadline(fn, seconds=60):
    """Run fn in a thread; the test fails (instead of hanging) when it has not returned by then."""
    result = {}
    thread = threading.Thread(target=lambda: result.update(value=_catch(fn)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "still blocked: the FIFO was opened for reading"
    return result["value"]


def _catch(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - returned to the test
        return e


def test_a_fifo_in_place_of_an_image_fails_at_once(tmp_path):
    records = make_run_folder(tmp_path / "run", steps=1, size=(96, 96))
    fifo = tmp_path / "run" / records[1]["image"]
    fifo.unlink()
    os.mkfifo(fifo)
    try:
        error = _with_deadline(lambda: build_dataset([tmp_path / "run"], tmp_path / "ds"))
        assert isinstance(error, DatasetError) and str(fifo) in str(error) and "FIFO" in str(error)
        out = _with_deadline(lambda: _score(tmp_path / "run", tmp_path / "s.parquet"))
        row = [r for r in pq.read_table(out).to_pylist() if r["step"] == records[1]["step"]
               and r["chain_id"] == records[1]["chain_id"]][0]
        assert str(fifo) in row["error"] and "FIFO" in row["error"]
    finally:  # unblock a reader of the old code, so that the thread ends
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        os.close(fd)


def test_a_full_disk_names_the_path_and_leaves_no_temporary_file(tmp_path, capsys, monkeypatch):
    make_run_folder(tmp_path / "run", steps=1, size=(96, 96))

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio.os, "fsync", full)
    assert main(["score", str(tmp_path / "run"), "--metrics", "piqe", "--out", str(tmp_path / "s.parquet"),
                 "--device", "cpu"]) == 1
    line = _one_line_error(capsys, "score")
    assert "No space left on device" in line and str(tmp_path / "s.parquet.parts") in line
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


def test_write_file_atomic_fsyncs_the_file_and_its_folder(tmp_path, monkeypatch):
    import stat

    synced = []
    real = os.fsync
    monkeypatch.setattr(fileio.os, "fsync", lambda fd: synced.append(os.fstat(fd).st_mode) or real(fd))
    fileio.write_file_atomic(tmp_path / "sub" / "f.bin", b"data")
    assert (tmp_path / "sub" / "f.bin").read_bytes() == b"data"
    assert [stat.S_ISREG(m) for m in synced] == [True, False] and stat.S_ISDIR(synced[1])
    assert fileio.sha256_file(tmp_path / "sub" / "f.bin") == sha256_bytes(b"data")


def test_generate_with_a_lost_manifest_refuses_instead_of_regenerating(tmp_path, sources, capsys):
    out = tmp_path / "run"
    assert main(["generate", "--sources", str(sources), "--steps", "2", "--out", str(out)]) == 0
    images = {p: p.read_bytes() for p in out.rglob("step_*.png")}
    (out / MANIFEST_NAME).unlink()
    assert main(["generate", "--sources", str(sources), "--steps", "2", "--out", str(out)]) == 1
    line = _one_line_error(capsys, "generate")
    assert str(out / MANIFEST_NAME) in line and "run.json" in line and "new --out" in line
    assert {p: p.read_bytes() for p in out.rglob("step_*.png")} == images
    assert not (out / MANIFEST_NAME).exists()


def test_verify_reports_a_broken_shard_once_by_its_path_in_the_dataset(tmp_path):
    make_run_folder(tmp_path / "run", steps=3)
    ds = build_dataset([tmp_path / "run"], tmp_path / "ds")
    shard = sorted((ds / "data").rglob("*.parquet"))[0]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    report = verify_dataset(ds)
    problems = [str(p) for p in report.problems]
    rel = shard.relative_to(ds).as_posix()
    assert len(problems) == 1 and problems[0].startswith(rel), problems
    assert not any(" object at 0x" in p for p in problems)


def test_verify_never_prints_an_object_repr():
    from PIL import UnidentifiedImageError

    from banana100.dataset.verify import describe_image_error

    try:
        Image.open(__import__("io").BytesIO(b"not an image"))
    except UnidentifiedImageError as e:
        assert "object at 0x" in str(e)  # what PIL says
        assert "object at 0x" not in describe_image_error(e, decode=False)


@pytest.mark.integration  # several processes
def test_no_orphan_workers_after_a_sigkill_of_the_parent(tmp_path):
    import signal

    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(REPO / 'tests')!r})
        from pathlib import Path
        from banana100.testing.runfolder import make_run_folder
        import banana100.dataset.checks as checks

        def block(item):  # a worker busy on an image, as a long --num-proc build is
            os.write(1, b"%d\\n" % os.getpid())  # one write: two workers' lines never interleave
            time.sleep(3600)

        checks.check_image = block
        make_run_folder(Path({str(tmp_path / 'run')!r}), steps=3)
        items = checks.collect_items([Path({str(tmp_path / 'run')!r})])
        checks.check_images(items, workers=2, processes=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    workers = {int(proc.stdout.readline()) for _ in range(2)}  # both workers are busy (an event, no sleep)
    assert proc.pid not in workers and len(workers) == 2
    assert all(Path(f"/proc/{pid}").exists() for pid in workers)  # real, running workers
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    def alive(pid):
        try:
            state = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return False
        return "\nState:\tZ" not in state  # a zombie has exited

    import time

    deadline = time.monotonic() + 60  # a deadline for the poll, not a tuned wait
    while any(map(alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in workers if alive(pid)]
    for pid in left:  # do not leave them to the other tests
        os.kill(pid, signal.SIGKILL)
    assert not left, f"workers {left} outlived their parent"


def test_build_on_a_full_disk_names_the_shard(tmp_path, capsys, monkeypatch):
    import banana100.dataset.shards as shards

    make_run_folder(tmp_path / "run", steps=2)
    # every shard write fails (the shard writer opens its files with `open`: shards._KeptErrorsFile)
    monkeypatch.setattr(shards, "open", lambda path, mode="r", *a, **k: builtins.open(
        "/dev/full" if mode == "wb" and str(path).endswith(".parquet") else path, mode, *a, **k), raising=False)
    assert main(["build-dataset", str(tmp_path / "run"), "--out", str(tmp_path / "ds")]) == 1
    line = _one_line_error(capsys, "build-dataset")
    assert "no space left on device" in line and ".part-00000.parquet" in line and ".ds.building" in line
    assert not (tmp_path / "ds").exists()


def _full_for(monkeypatch, word: str) -> None:
    """Every shard written into a folder whose path holds `word` goes to /dev/full (a real ENOSPC
    from the kernel, in --num-proc workers too: they are forked)."""
    import banana100.dataset.shards as shards

    def full_open(path, mode="r", *args, **kwargs):
        shard = mode == "wb" and str(path).endswith(".parquet") and word in str(path)
        return builtins.open("/dev/full" if shard else path, mode, *args, **kwargs)

    monkeypatch.setattr(shards, "open", full_open, raising=False)


@pytest.mark.parametrize("num_proc", ["1", "2"])
def test_a_full_disk_in_a_worker_names_the_shard_and_the_rerun_keeps_what_was_built(tmp_path, capsys, monkeypatch,
                                                                                       num_proc):
    """The disk fills while the endpoints shard is written (in a --num-proc worker, or not): one
    line naming that shard and "no space left"; the finished data shard is kept and reused by the
    same command run again once there is room."""
    make_run_folder(tmp_path / "run", steps=5)
    _full_for(monkeypatch, "endpoints")
    args = ["build-dataset", str(tmp_path / "run"), "--out", str(tmp_path / "ds"), "--num-proc", num_proc]
    assert main(args) == 1
    line = _one_line_error(capsys, "build-dataset")
    assert "no space left on device" in line and "run the same command again" in line, line
    assert str(tmp_path / ".ds.building" / "endpoints" / ".part-00000.parquet") in line
    assert not (tmp_path / "ds").exists()
    built = next((tmp_path / ".ds.building" / "data").rglob(".part-00000.parquet"))
    inode = built.stat().st_ino
    monkeypatch.undo()  # room again
    assert main(args) == 0
    final = next((tmp_path / "ds" / "data").rglob("train-00000-of-00001.parquet"))
    assert final.stat().st_ino == inode  # the shard written before the full disk, reused
    from banana100.dataset.verify import verify_dataset

    assert verify_dataset(tmp_path / "ds").ok


def test_a_full_disk_at_a_small_file_of_the_build_names_it(tmp_path, capsys, monkeypatch):
    """A full disk when the work folder's own small files are written (a file's flush at close
    names no file: the message was "[Errno 28] No space left on device" alone)."""
    import pathlib

    make_run_folder(tmp_path / "run", steps=2)
    real = pathlib.Path.write_text

    def full(self, *args, **kwargs):
        if self.name == ".checked-images":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", full)
    assert main(["build-dataset", str(tmp_path / "run"), "--out", str(tmp_path / "ds")]) == 1
    line = _one_line_error(capsys, "build-dataset")
    assert f"cannot write {tmp_path / '.ds.building' / '.checked-images'}: no space left on device" in line, line


@pytest.mark.integration  # two CLI processes
def test_a_real_file_size_limit_during_build_then_a_rerun(tmp_path):
    """A real write failure from the kernel: `ulimit -f` (RLIMIT_FSIZE; Python ignores SIGXFSZ, so
    the write fails with EFBIG) smaller than a shard. One line naming the shard, status 1; the
    same command without the limit finishes the dataset."""
    import resource
    import subprocess
    import sys

    make_run_folder(tmp_path / "run", steps=8, size=(160, 160))
    cmd = [sys.executable, "-m", "banana100", "build-dataset", str(tmp_path / "run"), "--out", str(tmp_path / "ds")]
    limit = 64 * 1024  # bytes: smaller than the data shard, larger than every small file of the build

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    res = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limited, timeout=300)
    assert res.returncode == 1, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "file too large" in lines[0] and ".part-00000.parquet" in lines[0], res.stderr
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    from banana100.dataset.verify import verify_dataset

    assert verify_dataset(tmp_path / "ds").ok


def test_reading_a_fifo_as_an_image_fails_at_once(tmp_path):
    from banana100.errors import ImageReadError
    from banana100.imageio import load_rgb

    fifo = tmp_path / "image.png"
    os.mkfifo(fifo)
    try:
        error = _with_deadline(lambda: load_rgb(fifo))
        assert isinstance(error, ImageReadError) and str(fifo) in str(error) and "FIFO" in str(error)
    finally:
        os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))


@pytest.mark.integration  # several processes
@pytest.mark.parametrize("instant", ["before_rename", "before_parts_removed"])
def test_a_real_kill_at_the_merge_instant_then_a_rerun(tmp_path, instant):
    """A real SIGKILL while `score` merges: with the temporary merged file written but not yet
    renamed, or with the merged file in place but the parts not yet removed."""
    import signal

    make_run_folder(tmp_path / "run", steps=3, size=(96, 96))  # 8 images
    out = tmp_path / "s.parquet"
    script = textwrap.dedent(f"""
        import os, sys
        import banana100.fileio as fileio
        import banana100.scoring as scoring
        out = {str(out)!r}

        def stop_here():
            os.write(1, b"at the instant\\n")
            sys.stdin.readline()  # killed while waiting here

        real_replace, real_rmtree = fileio.os.replace, scoring.store.shutil.rmtree
        def replace(src, dst):
            if {instant!r} == "before_rename" and str(dst) == out:
                stop_here()
            return real_replace(src, dst)
        def rmtree(path, *a, **k):
            if {instant!r} == "before_parts_removed":
                stop_here()
            return real_rmtree(path, *a, **k)
        fileio.os.replace, scoring.store.shutil.rmtree = replace, rmtree
        scoring.score_to_parquet({str(tmp_path / 'run')!r}, ["piqe"], out, device="cpu", progress=False, chunk_size=3)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=REPO)
    try:
        assert proc.stdout.readline().strip() == "at the instant"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert list((tmp_path / "s.parquet.parts").glob("part-*.parquet"))  # the state the kill left
    _score(tmp_path / "run", out)  # the rerun: the lock of the killed run is free again
    keys = _keys(out)
    assert len(keys) == len(set(keys)) == 8
    assert not (tmp_path / "s.parquet.parts").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "s.parquet"]  # no temporary or lock file left
