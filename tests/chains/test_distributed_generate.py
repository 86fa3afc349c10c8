"""`generate` shared by several processes (accelerate launch / torchrun): one run folder, one
manifest, each chain made by one process, resumable after any of them is killed.

The fast tests run the ranks as threads of this process, each with its own `Processes` stand-in
(rank, world, a barrier shared by the threads): the run folder's locks and the manifest's
per-line flock hold between threads exactly as between processes (flock belongs to each open
file). The integration tests start real processes with torchrun on the tiny open-editor pipeline.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from banana100.chains import runner
from banana100.chains.editors.simulated import SimulatedEditor
from banana100.chains.manifest import MANIFEST_NAME, ManifestWriter, read_manifest
from banana100.chains.store import ProcessLocks, RunLock
from banana100.errors import Banana100Error, UsageError
from banana100.testing.runfolder import write_source


class FakeProcesses:
    """banana100.distributed.Processes for rank `rank` of `world` ranks run as threads."""

    def __init__(self, rank: int, world: int, barrier: threading.Barrier):
        self.rank, self.world, self.local_rank, self._barrier = rank, world, rank, barrier

    def device(self, device):
        return device

    def barrier(self):
        self._barrier.wait(timeout=60)

    def share(self, items):
        return items[self.rank::self.world]


@pytest.fixture()
def sources(tmp_path):
    folder = tmp_path / "sources"
    folder.mkdir()
    for i, name in enumerate(("alpha", "beta", "gamma")):
        write_source(folder / f"{name}.png", seed=i)
    return folder


def run_ranks(monkeypatch, sources, out, world=2, editor=SimulatedEditor, **kw):
    """generate_chains in `world` threads, thread i as rank i; returns the summaries by rank."""
    barrier = threading.Barrier(world)
    results: dict[int, object] = {}

    def rank_main():
        try:
            results[int(threading.current_thread().name)] = runner.generate_chains(
                editor(), sources, "replicate", kw.get("steps", 3), kw.get("repeats", 2), out, progress=False,
                concurrency=2, **{k: v for k, v in kw.items() if k not in ("steps", "repeats")})
        except BaseException as e:  # noqa: BLE001 - handed to the test
            results[int(threading.current_thread().name)] = e
            barrier.abort()  # as torchrun stops the other processes when one fails

    threads = [threading.Thread(target=rank_main, name=str(i)) for i in range(world)]
    with monkeypatch.context() as m:
        m.setattr(runner, "Processes", lambda device: FakeProcesses(int(threading.current_thread().name), world,
                                                                    barrier))
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    return results


def hashes(run_dir: Path) -> dict:
    return {(r["chain_id"], r["step"]): r["sha256"] for r in read_manifest(run_dir)}


def test_ranks_share_the_chains_into_one_manifest(monkeypatch, sources, tmp_path):
    summaries = run_ranks(monkeypatch, sources, tmp_path / "two", steps=3, repeats=2)
    assert all(not isinstance(s, BaseException) for s in summaries.values()), summaries
    # 6 chains: rank 0 makes chains #0, #2, #4 of the sorted ids, rank 1 #1, #3, #5
    assert [summaries[r].chains for r in (0, 1)] == [3, 3]
    assert [summaries[r].written for r in (0, 1)] == [12, 12]
    assert "process 1 of 2" in str(summaries[1])
    lines = (tmp_path / "two" / MANIFEST_NAME).read_text().splitlines()
    assert len(lines) == 24 == len(read_manifest(tmp_path / "two"))  # nothing twice, every line whole
    assert len({r["chain_id"] for r in read_manifest(tmp_path / "two")}) == 6

    # the same chains as one process: per-chain seeds, whichever process made them
    one = runner.generate_chains(SimulatedEditor(), sources, "replicate", 3, 2, tmp_path / "one", progress=False)
    assert one.chains == 6 and one.process is None
    assert hashes(tmp_path / "two") == hashes(tmp_path / "one")

    # rerun with two processes: nothing left to make, nothing appended
    before = (tmp_path / "two" / MANIFEST_NAME).read_bytes()
    again = run_ranks(monkeypatch, sources, tmp_path / "two", steps=3, repeats=2)
    assert [again[r].written for r in (0, 1)] == [0, 0]
    assert (tmp_path / "two" / MANIFEST_NAME).read_bytes() == before


def test_a_resumed_run_shares_what_is_left(monkeypatch, sources, tmp_path):
    """A run folder begun by one process (or another number of them) is finished by two: they
    share the chains still to make, and every chain continues after its last record."""
    runner.generate_chains(SimulatedEditor(), sources, "replicate", 2, 1, tmp_path / "run", progress=False)
    summaries = run_ranks(monkeypatch, sources, tmp_path / "run", steps=4, repeats=2)  # extend both ways
    assert sum(summaries[r].written for r in (0, 1)) == 3 * 2 + 3 * 5
    runner.generate_chains(SimulatedEditor(), sources, "replicate", 4, 2, tmp_path / "one", progress=False)
    assert hashes(tmp_path / "run") == hashes(tmp_path / "one")


def test_a_paid_editor_is_refused_in_several_processes(monkeypatch, sources, tmp_path):
    class Paid(SimulatedEditor):
        metered = True

    summaries = run_ranks(monkeypatch, sources, tmp_path / "run", editor=Paid)
    assert all(isinstance(e, UsageError) and "one process" in str(e) for e in summaries.values())
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_run_folder_locks(tmp_path):
    """The processes of one distributed run hold the folder together; a lone run, or a second
    distributed run, is refused while they work (and a distributed run while a lone one works)."""
    run = tmp_path / "run"
    with ProcessLocks(run, 0), ProcessLocks(run, 1):
        with pytest.raises(Banana100Error, match="in use by another `banana100 generate`"):
            RunLock(run).__enter__()
        with pytest.raises(Banana100Error, match="in use"):
            ProcessLocks(run, 1).__enter__()
    with RunLock(run):
        with pytest.raises(Banana100Error, match="in use"):
            ProcessLocks(run, 2).__enter__()
    with ProcessLocks(run, 0):  # everything was released
        pass


def test_a_line_left_by_a_killed_writer_is_cut_before_the_next(tmp_path):
    """Two writers share a manifest; one dies in the middle of a line. The other's next line is
    not glued to the remains: the remains are cut (that step is adopted or made again on resume)."""
    from banana100.testing.runfolder import make_run_folder

    make_run_folder(tmp_path / "src", steps=1, size=(32, 32))
    records = read_manifest(tmp_path / "src")
    run = tmp_path / "run"
    run.mkdir()
    with ManifestWriter(run) as alive:
        alive.append(records[0])
        with open(run / MANIFEST_NAME, "ab") as dead:  # another process's unfinished append
            dead.write(b'{"chain_id": "x", "st')
        with pytest.warns(UserWarning, match="incomplete last line"):
            alive.append(records[1])
        alive.append(records[2])
    assert read_manifest(run) == records[:3]
    assert (run / MANIFEST_NAME).read_bytes().count(b"\n") == 3
    # a run that starts after a crash cuts the unfinished line before writing anything
    with open(run / MANIFEST_NAME, "ab") as dead:
        dead.write(b'{"chain_id": "y"')
    with pytest.warns(UserWarning, match="incomplete last line"):
        ManifestWriter(run).close()
    assert (run / MANIFEST_NAME).read_bytes().endswith(b"\n") and read_manifest(run) == records[:3]


def test_processes_share_every_nth_item(monkeypatch):
    from banana100.distributed import Processes

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    procs = Processes(None)  # no launcher: one process, nothing imported
    assert (procs.rank, procs.world) == (0, 1) and procs.share([3, 1, 2]) == [3, 1, 2]
    procs.rank, procs.world = 1, 3
    assert procs.share(list(range(8))) == [1, 4, 7]


# -- real processes: torchrun on the tiny Qwen-Image-Edit-Plus pipeline -------------------------

def _rank_pid(launcher_pid: int, rank: int, deadline: float) -> int:
    """The pid of the launcher's worker with RANK=`rank` (read from /proc)."""
    import time

    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{launcher_pid}/task/{launcher_pid}/children").read_text().split()
        except OSError:
            children = []
        for pid in children:
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"RANK={rank}".encode() in env:
                return int(pid)
        time.sleep(0.1)
    pytest.fail(f"no worker with RANK={rank} under the launcher")


def _recorded_files(run_dir: Path) -> dict:
    """(inode, mtime) of every recorded image: a rewrite (temporary file + rename) changes both."""
    out = {}
    for r in read_manifest(run_dir):
        st = (run_dir / r["image"]).stat()
        out[r["image"]] = (st.st_ino, st.st_mtime_ns)
    return out


LAUNCHERS = {  # as modules of this interpreter: a venv need not have the console scripts
    "torchrun": ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"],
    "accelerate": ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                   "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0"],
}


@pytest.mark.integration  # several processes
@pytest.mark.parametrize("launcher", list(LAUNCHERS))
def test_launchers_start_two_processes_into_one_run_folder(tmp_path, sources, launcher):
    import subprocess
    import sys

    from fixtures.repopaths import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, *LAUNCHERS[launcher], "-m", "banana100", "generate", "--sources", str(sources),
           "--steps", "2", "--repeats", "2", "--out", str(tmp_path / "run")]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "process 0 of 2" in r.stdout and "process 1 of 2" in r.stdout
    assert r.stdout.count("images written this run: 9") == 2  # 3 chains of 3 images each
    lines = (tmp_path / "run" / MANIFEST_NAME).read_text().splitlines()
    assert len(lines) == 18 == len(read_manifest(tmp_path / "run"))


@pytest.mark.integration  # several processes, diffusers
def test_torchrun_two_processes_kill_one_and_resume(tmp_path):
    """Two processes under torchrun share the chains; one is SIGKILLed mid-run (torchrun then stops
    the other); the same command resumes: every chain complete, no record twice, no recorded image
    rewritten, and the chains equal those of one process (Qwen-Image-Edit-Plus takes one image per
    call, so no batch rounding: the images are identical)."""
    import signal
    import subprocess
    import sys
    import time

    import numpy as np

    pytest.importorskip("diffusers", reason="the diffusers extra is not installed (pip install -e '.[diffusers]')")
    if not Path("/proc/self/environ").exists():
        pytest.skip("finding a worker's rank needs /proc (Linux)")
    from fixtures.repopaths import REPO

    from banana100.imageio import encode_png
    from banana100.testing import tinypipes

    model = tmp_path / "tiny-qwen-edit-plus"
    tinypipes.tiny_qwen_edit_plus().save_pretrained(model)
    sources = tmp_path / "sources"
    sources.mkdir()
    for i, (h, w) in enumerate(((70, 100), (96, 64))):
        (sources / f"s{i}.png").write_bytes(encode_png((np.random.default_rng(i).random((h, w, 3)) * 255)
                                                       .astype(np.uint8)))
    args = ["generate", "--editor", "diffusers", "--model", str(model), "--device", "cpu", "--inference-steps", "2",
            "--sources", str(sources), "--steps", "4", "--repeats", "2", "--concurrency", "2"]
    torchrun = [sys.executable, *LAUNCHERS["torchrun"], "-m", "banana100"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    two = tmp_path / "two"
    cmd = torchrun + args + ["--out", str(two)]

    with open(tmp_path / "log.txt", "wb") as log:
        launcher = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 300
        victim = _rank_pid(launcher.pid, 1, deadline)
        manifest = two / MANIFEST_NAME
        while not manifest.is_file() or manifest.read_bytes().count(b"\n") < 4 + 3:  # 4 sources, 3 edits
            if launcher.poll() is not None or time.monotonic() > deadline:
                launcher.kill()
                pytest.fail(f"generate ended before 7 records: {(tmp_path / 'log.txt').read_text()[-3000:]}")
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        assert launcher.wait(120) != 0  # torchrun stops the other rank and fails
    log_text = (tmp_path / "log.txt").read_text()
    assert "process 0/2" in log_text and "process 1/2" in log_text
    done = read_manifest(two)
    assert 7 <= len(done) < 20
    kept = _recorded_files(two)

    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [line for line in (two / MANIFEST_NAME).read_text().splitlines() if line.strip()]
    records = read_manifest(two)
    assert len(lines) == len(records) == 4 * 5  # every chain complete, no record twice
    assert {k: v for k, v in _recorded_files(two).items() if k in kept} == kept  # nothing recorded was rewritten

    one = tmp_path / "one"
    r = subprocess.run([sys.executable, "-m", "banana100"] + args + ["--out", str(one)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert hashes(two) == hashes(one)


def test_each_process_loads_the_editor_on_its_own_gpu(monkeypatch):
    """Under a launcher, a diffusers editor with --device unset or `cuda` goes to cuda:LOCAL_RANK
    (checked without a GPU: torch is told one is there); an explicit device stays."""
    import torch

    from banana100.chains.editors import make_editor
    from banana100.distributed import Processes

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    procs = object.__new__(Processes)  # rank 3 of 4, local rank 1 (the second machine's second GPU)
    procs.rank, procs.world, procs.local_rank, procs._state = 3, 4, 1, None
    assert [procs.device(d) for d in (None, "cuda", "cuda:0", "cpu")] == ["cuda:1", "cuda:1", "cuda:0", "cpu"]
    monkeypatch.setattr(runner, "Processes", lambda device: procs)
    for asked, placed in ((None, "cuda:1"), ("cuda", "cuda:1"), ("cpu", "cpu")):
        editor = make_editor("diffusers", model="some/model", device=asked)
        runner.run_processes(editor, None, None)
        assert editor.device == placed


@pytest.mark.integration  # builds the tiny FLUX.2 pipelines (diffusers, transformers: ~10 s)
def test_batched_flux2_chains_in_two_processes_match_one_within_rounding(monkeypatch, tmp_path):
    """A process batches only its own chains, so two processes make batches of 2 where one makes a
    batch of 4: the images agree within the rounding of the batched products (a level now and then)."""
    import numpy as np

    pytest.importorskip("diffusers", reason="the diffusers extra is not installed (pip install -e '.[diffusers]')")
    from banana100.chains.editors import make_editor
    from banana100.imageio import encode_png, load_rgb
    from banana100.testing import tinypipes

    sources = tmp_path / "sources"
    sources.mkdir()
    for i in range(4):  # one size: a single process puts all four chains in one call
        (sources / f"s{i}.png").write_bytes(encode_png((np.random.default_rng(i).random((64, 64, 3)) * 255)
                                                       .astype(np.uint8)))
    options = {"num_inference_steps": 2, "max_sequence_length": 64, "max_batch": 4,
               "pipeline_options": {"text_encoder_out_layers": (1,)}}
    pipes = [tinypipes.tiny_flux2(), tinypipes.tiny_flux2()]  # one per process (same seeded weights)
    calls = []

    def editor():
        e = make_editor("diffusers", model="tiny-flux2", pipeline=pipes[int(threading.current_thread().name)],
                        **options)
        e.edit_batch = (lambda f: lambda reqs: calls.append(len(reqs)) or f(reqs))(e.edit_batch)
        return e

    summaries = run_ranks(monkeypatch, sources, tmp_path / "two", editor=editor, steps=3, repeats=1)
    assert all(not isinstance(s, BaseException) for s in summaries.values()), summaries
    assert sorted(calls) == [2] * 6  # 2 processes x 3 steps, 2 chains per call
    one = make_editor("diffusers", model="tiny-flux2", pipeline=pipes[0], **options)
    calls.clear()
    one.edit_batch = (lambda f: lambda reqs: calls.append(len(reqs)) or f(reqs))(one.edit_batch)
    runner.generate_chains(one, sources, "replicate", 3, 1, tmp_path / "one", concurrency=4, progress=False)
    assert calls == [4] * 3

    two, ref = read_manifest(tmp_path / "two"), {(r["chain_id"], r["step"]): r for r in read_manifest(tmp_path / "one")}
    assert sorted((r["chain_id"], r["step"]) for r in two) == sorted(ref)
    assert all(r["seed"] == ref[(r["chain_id"], r["step"])]["seed"] for r in two)  # per-chain seeds
    worst, shares = 0, []
    for r in two:
        diff = np.abs(load_rgb(tmp_path / "two" / r["image"]).astype(int)
                      - load_rgb(tmp_path / "one" / ref[(r["chain_id"], r["step"])]["image"]))
        worst = max(worst, int(diff.max()))
        shares.append(np.count_nonzero(diff) / diff.size)
    assert worst <= 1 and max(shares) < 1e-3, (worst, max(shares))  # measured: 1 level, 8e-5 of the values
