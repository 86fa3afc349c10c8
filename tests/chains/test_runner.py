"""The chain runner: run folders, manifests, resume, crash safety, errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from PIL import Image

from banana100.cli import main as cli_main
from banana100.chains.editors.base import FREE, EditResult, Editor
from banana100.chains.editors.simulated import DELAY_ENV, SimulatedEditor
from banana100.errors import Banana100Error, ImageReadError, ManifestError
from banana100.imageio import load_rgb
from banana100.chains.manifest import MANIFEST_NAME, read_manifest, sha256_bytes
from banana100.chains.runner import generate_chains
from banana100.chains.step import step_seed
from banana100.chains.store import RUN_FILE
from banana100.errors import ChainsFailedError, RunMismatchError
from banana100.schema import FIELD_NAMES
from banana100.chains.settings import Setting, get_setting
from banana100.testing.runfolder import write_source

from fixtures.repopaths import REPO
from fixtures.runs import check_chains
REPLICA = "Produce an exact replica of the provided image, with no alterations."


def run(sources, out, steps=3, repeats=1, setting="replicate", editor=None, **kw):
    return generate_chains(editor or SimulatedEditor(), sources, setting, steps, repeats, out, progress=False, **kw)


def by_chain(records):
    out = {}
    for r in records:
        out.setdefault(r["chain_id"], []).append(r)
    return {k: sorted(v, key=lambda r: r["step"]) for k, v in out.items()}


def check_run(out: Path, n_chains: int, steps: int, setting="replicate", seed=0) -> dict:
    """Every invariant of a finished run folder; returns the records by chain."""
    chains = check_chains(out, n_chains, steps)  # complete, linked, as recorded
    s = get_setting(setting)
    for cid, recs in chains.items():
        for r in recs:
            assert set(r) <= set(FIELD_NAMES)
            assert r["image"] == f"{cid}/step_{r['step']:03d}.png"
            assert (r["editor"], r["model"], r["setting"]) == ("simulated", "simulated-v1", setting)
            if r["step"] == 0:
                assert r["prompt"] is None and r["seed"] is None
                assert {"prompt", "seed", "parent_sha256"} <= set(r)  # explicit nulls
            else:
                assert r["prompt"] == s.prompt(r["step"])
                assert r["seed"] == step_seed(seed, cid, r["step"])
                assert r["finish_reason"] == "STOP" and r["attempts"] == 1
                assert json.loads(r["editor_info"])["simulated"] is True
                assert isinstance(r["latency_s"], float)
    return chains


def test_run_folder_is_valid(sources, tmp_path):
    out = tmp_path / "run"
    summary = run(sources, out, steps=3, repeats=2)
    assert (summary.chains, summary.written, summary.already_present, summary.chains_complete) == (4, 16, 0, 4)
    text = str(summary)
    assert str(out) in text and "written this run: 16" in text and "4 complete" in text
    chains = check_run(out, n_chains=4, steps=3)
    assert set(chains) == {f"{s}__replicate__r{r}" for s in ("alpha", "beta") for r in (0, 1)}
    # Step 0 is the source, decoded to RGB; repeats differ (their seeds differ).
    src = load_rgb(sources / "alpha.png")
    assert np.array_equal(load_rgb(out / "alpha__replicate__r0/step_000.png"), src)
    a0 = (out / "alpha__replicate__r0/step_003.png").read_bytes()
    assert a0 != (out / "alpha__replicate__r1/step_003.png").read_bytes()
    params = json.loads((out / RUN_FILE).read_text())
    assert {k: params[k] for k in ("editor", "model", "setting", "seed")} == {
        "editor": "simulated",
        "model": "simulated-v1",
        "setting": "replicate",
        "seed": 0,
    }
    # Each step is the editor applied to the previous stored image with the recorded seed.
    ed = SimulatedEditor()
    rec = chains["beta__replicate__r0"][2]
    prev = load_rgb(out / chains["beta__replicate__r0"][1]["image"])
    assert np.array_equal(load_rgb(out / rec["image"]), ed.apply(prev, seed=rec["seed"]))


def test_rerun_resumes_and_extends(sources, tmp_path):
    out = tmp_path / "run"
    run(sources, out, steps=2)
    manifest = (out / MANIFEST_NAME).read_bytes()
    again = run(sources, out, steps=2)
    assert (again.written, again.already_present, again.chains_complete) == (0, 6, 2)
    assert (out / MANIFEST_NAME).read_bytes() == manifest
    more = run(sources, out, steps=5)
    assert (more.written, more.already_present) == (6, 6)
    check_run(out, n_chains=2, steps=5)
    # More repeats add chains; the old ones stay as they are.
    wider = run(sources, out, steps=5, repeats=2)
    assert (wider.written, wider.chains) == (12, 4)
    check_run(out, n_chains=4, steps=5)
    # The extended run equals a run made in one go.
    fresh = tmp_path / "fresh"
    run(sources, fresh, steps=5, repeats=2)
    for rec in read_manifest(fresh):
        assert (out / rec["image"]).read_bytes() == (fresh / rec["image"]).read_bytes()


def test_refuses_changed_parameters(sources, tmp_path):
    out = tmp_path / "run"
    run(sources, out, steps=1)
    before = (out / MANIFEST_NAME).read_bytes()
    with pytest.raises(RunMismatchError, match="setting") as info:
        run(sources, out, steps=1, setting="mirror")
    assert isinstance(info.value, Banana100Error) and "'replicate'" in str(info.value)
    with pytest.raises(RunMismatchError, match="seed"):
        run(sources, out, steps=1, seed=1)

    class Other(SimulatedEditor):
        model = "simulated-v2"

    with pytest.raises(RunMismatchError, match="model"):
        run(sources, out, steps=1, editor=Other())
    assert (out / MANIFEST_NAME).read_bytes() == before


def test_editor_options_are_fixed_parameters(sources, tmp_path):
    """An editor's `fixed_options` go into run.json; a rerun with another value (given or left out)
    is one error naming the option, the value recorded and the value given, before `connect`."""

    class Knobbed(SimulatedEditor):
        option_flags: ClassVar[dict[str, str]] = {"knob": "--knob"}

        def __init__(self, knob=None, connected=True):
            super().__init__()
            self.knob, self.connected = knob, connected

        def fixed_options(self):
            return {"knob": self.knob}

        def connect(self):
            if not self.connected:
                raise AssertionError("connect() before the run parameters were checked")

    out = tmp_path / "run"
    run(sources, out, steps=1, editor=Knobbed(4))
    assert json.loads((out / RUN_FILE).read_text())["knob"] == 4
    before = (out / MANIFEST_NAME).read_bytes()
    for knob, given, fix in ((5, "--knob 5", "give --knob 4"), (None, "no --knob (the default)", "give --knob 4")):
        for dry_run in (False, True):
            with pytest.raises(RunMismatchError) as info:
                run(sources, out, steps=2, editor=Knobbed(knob, connected=False), dry_run=dry_run)
            text = str(info.value)
            assert f"was made with --knob 4 (knob=4 in {RUN_FILE}), but this command gives {given}" in text
            assert fix in text and "\n" not in text
    assert (out / MANIFEST_NAME).read_bytes() == before
    assert run(sources, out, steps=2, editor=Knobbed(4)).written == 2  # the same value resumes (2 chains)

    unset = tmp_path / "unset"
    run(sources, unset, steps=1, editor=Knobbed())
    with pytest.raises(RunMismatchError, match=r"with no --knob \(knob=null in run.json\), but this command gives "
                                               r"--knob 3\. .*: leave --knob out to resume"):
        run(sources, unset, steps=1, editor=Knobbed(3, connected=False))
    # a folder made before the option was recorded: not checked (its value is unknown)
    params = json.loads((out / RUN_FILE).read_text())
    del params["knob"]
    (out / RUN_FILE).write_text(json.dumps(params))
    assert run(sources, out, steps=3, editor=Knobbed(7)).written == 2


def test_open_editor_size_policy_is_a_fixed_parameter(tmp_path):
    """--size changes every image of an open editor's chains, so a run folder keeps the one it was
    made with: a resume with the other policy is one error naming --size and both values."""
    from banana100.chains.editors.diffusion import DiffusersEditor
    from banana100.chains.store import check_run_file, check_run_parameters, run_parameters
    from banana100.chains.settings import get_setting

    native = DiffusersEditor(model="some/model", size="native")
    assert native.fixed_options()["size_policy"] == "native"
    setting = get_setting("replicate")
    check_run_file(tmp_path, run_parameters(native, setting, 0), False, None, DiffusersEditor.option_flags)
    source = DiffusersEditor(model="some/model")  # --size source, the default
    with pytest.raises(RunMismatchError, match=r"made with --size native \(size_policy=\"native\" in run.json\), "
                                               r"but this command gives --size source.*give --size native"):
        check_run_parameters(tmp_path, run_parameters(source, setting, 0), DiffusersEditor.option_flags)
    check_run_parameters(tmp_path, run_parameters(DiffusersEditor(model="some/model", size="native"), setting, 0),
                         DiffusersEditor.option_flags)


def test_open_editor_dtype_is_a_fixed_parameter_as_resolved(tmp_path):
    """The dtype a pipeline runs in is recorded as resolved (bfloat16 on a GPU, float32 elsewhere,
    unless --dtype): a resume on another kind of device, which would switch it, is refused."""
    from banana100.chains.editors.diffusion import DiffusersEditor
    from banana100.chains.settings import get_setting
    from banana100.chains.store import check_run_file, check_run_parameters, run_parameters

    setting = get_setting("replicate")
    on_cpu = DiffusersEditor(model="some/model", device="cpu")
    assert on_cpu.fixed_options()["dtype"] == "float32"
    assert DiffusersEditor(model="some/model", device="cuda:1").fixed_options()["dtype"] == "bfloat16"
    check_run_file(tmp_path, run_parameters(on_cpu, setting, 0), False, None, DiffusersEditor.option_flags)
    with pytest.raises(RunMismatchError, match=r"made with --dtype float32 .* but this command gives --dtype bfloat16"):
        check_run_parameters(tmp_path, run_parameters(DiffusersEditor(model="some/model", device="cuda"), setting, 0),
                             DiffusersEditor.option_flags)
    check_run_parameters(tmp_path, run_parameters(DiffusersEditor(model="some/model", device="cuda", dtype="float32"),
                                                  setting, 0), DiffusersEditor.option_flags)


def test_source_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ImageReadError, match="no source images"):
        run(empty, tmp_path / "r1")
    with pytest.raises(ImageReadError, match="no such folder"):
        run(tmp_path / "missing", tmp_path / "r1")

    bad = tmp_path / "bad"
    bad.mkdir()
    write_source(bad / "good.png")
    (bad / "broken.png").write_bytes(b"this is not a png at all")
    with pytest.raises(ImageReadError, match="broken.png"):
        run(bad, tmp_path / "r2")
    assert not (tmp_path / "r2").exists()  # nothing was started

    dup = tmp_path / "dup"
    dup.mkdir()
    write_source(dup / "same.png")
    Image.open(dup / "same.png").save(dup / "same.jpg")
    with pytest.raises(Banana100Error, match="same"):
        run(dup, tmp_path / "r3")


def test_mirror_setting_flips(sources, tmp_path):
    out = tmp_path / "run"
    run(sources, out, steps=2, setting="mirror")
    chains = check_run(out, n_chains=2, steps=2, setting="mirror")
    recs = chains["alpha__mirror__r0"]
    imgs = [load_rgb(out / r["image"]) for r in recs]
    half = imgs[0].shape[1] // 2
    bright_left = [im[:, :half].mean() > im[:, half:].mean() for im in imgs]
    assert bright_left == [True, False, True]
    ed = SimulatedEditor()
    assert np.array_equal(imgs[1], ed.apply(imgs[0], seed=recs[1]["seed"], transform="hflip"))


def test_resume_checks_the_last_image(sources, tmp_path):
    out = tmp_path / "run"
    run(sources, out, steps=2)
    last = out / "alpha__replicate__r0" / "step_002.png"
    data = last.read_bytes()
    last.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ManifestError, match="step_002.png"):
        run(sources, out, steps=3)
    last.unlink()
    with pytest.raises(ManifestError, match="step_002.png.*missing"):
        run(sources, out, steps=3)
    last.write_bytes(data)
    assert run(sources, out, steps=3).written == 2


def test_image_without_record_is_refused_until_moved_aside(sources, tmp_path):
    """An image with neither a manifest line nor a side record (a cut manifest, or a crash under a
    version before side records): refused, not made again over it (issue 32); moved aside, it is made."""
    out = tmp_path / "run"
    run(sources, out, steps=3)
    lines = (out / MANIFEST_NAME).read_text().splitlines(keepends=True)
    dropped = json.loads(lines[-1])
    good = (out / dropped["image"]).read_bytes()
    (out / dropped["image"]).write_bytes(b"half-written garbage")
    (out / MANIFEST_NAME).write_text("".join(lines[:-1]) + lines[-1][:25])  # also a cut last line
    with pytest.warns(UserWarning), pytest.raises(ManifestError, match=f"1 image of 1 chain .{dropped['image']}"):
        run(sources, out, steps=3)
    assert (out / dropped["image"]).read_bytes() == b"half-written garbage"
    (out / dropped["image"]).rename(tmp_path / "aside.png")
    with pytest.warns(UserWarning):
        summary = run(sources, out, steps=3)
    assert summary.written == 1
    assert (out / dropped["image"]).read_bytes() == good
    check_run(out, n_chains=2, steps=3)


class Crash(BaseException):
    pass


def test_side_record_is_written_atomically_before_the_image(sources, tmp_path, monkeypatch):
    """A crash before step 2's manifest line leaves its image and its side record, written
    through the atomic helper (record first); the rerun adopts them without a new edit."""
    from banana100.chains import store
    from banana100.chains.manifest import ManifestWriter

    atomic = []
    real_atomic, real_append = store.write_file_atomic, ManifestWriter.append

    def spy(path, data):
        atomic.append(Path(path).name)
        return real_atomic(path, data)

    def crashing(self, record):
        if record["step"] == 2:
            raise Crash()
        return real_append(self, record)

    monkeypatch.setattr(store, "write_file_atomic", spy)
    monkeypatch.setattr(ManifestWriter, "append", crashing)
    out = tmp_path / "run"
    with pytest.raises(ChainsFailedError):
        run([sources / "alpha.png"], out, steps=3)
    cid = "alpha__replicate__r0"
    side = out / cid / ".step_002.record.json"
    images = [n for n in atomic if not n.startswith("run.")]
    assert images == ["step_000.png", ".step_001.record.json", "step_001.png", ".step_002.record.json", "step_002.png"]
    pending = json.loads(side.read_text())
    data = (out / cid / "step_002.png").read_bytes()
    assert (pending["chain_id"], pending["step"], pending["sha256"]) == (cid, 2, sha256_bytes(data))
    assert pending["seed"] == step_seed(0, cid, 2) and pending["prompt"] == REPLICA
    monkeypatch.setattr(ManifestWriter, "append", real_append)
    calls = []
    monkeypatch.setattr(SimulatedEditor, "edit", lambda self, req, _e=SimulatedEditor.edit: calls.append(req.step) or _e(self, req))
    assert run([sources / "alpha.png"], out, steps=3).written == 2  # step 2 adopted, step 3 made
    assert calls == [3] and not side.exists()
    assert next(r for r in read_manifest(out) if r["step"] == 2) == pending


def test_one_run_per_folder_at_a_time(sources, tmp_path):
    from banana100.chains.store import RunLock

    out = tmp_path / "run"
    out.mkdir()
    with RunLock(out), pytest.raises(Banana100Error, match="in use by another"):
        run(sources, out)
    assert run(sources, out, steps=1).written == 4


class FlakyEditor(SimulatedEditor):
    """Fails at step 2 of the beta chain; everything else as the simulated editor."""

    def edit(self, request):
        if request.step == 2 and request.image.shape[0] == 40:  # beta is 40 px high
            raise RuntimeError("service unavailable")
        return super().edit(request)


def test_one_failing_chain_does_not_stop_the_others(sources, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ChainsFailedError, match="beta__replicate__r0 at step 2.*service unavailable") as info:
        run(sources, out, steps=4, editor=FlakyEditor())
    assert set(info.value.failures) == {"beta__replicate__r0"}
    assert info.value.summary.chains_complete == 1
    chains = by_chain(read_manifest(out))
    assert [r["step"] for r in chains["alpha__replicate__r0"]] == [0, 1, 2, 3, 4]
    assert [r["step"] for r in chains["beta__replicate__r0"]] == [0, 1]
    # Rerunning with a working editor (same name and model) finishes the failed chain.
    assert run(sources, out, steps=4).written == 3
    check_run(out, n_chains=2, steps=4)


class BytesEditor(SimulatedEditor):
    """Returns its own PNG encoding (level 9): the runner must store those bytes as they are."""

    def edit(self, request):
        res = super().edit(request)
        import io

        buf = io.BytesIO()
        Image.fromarray(res.image).save(buf, format="PNG", compress_level=9)
        md = dict(res.metadata, thought_summary="looks fine", surprise=np.float32(1.5), input_tokens=np.int64(7))
        return EditResult(image=None, metadata=md, image_bytes=buf.getvalue())


def test_editor_bytes_and_metadata(sources, tmp_path):
    out = tmp_path / "run"
    run(sources, out, steps=2, editor=BytesEditor())
    recs = [r for r in read_manifest(out) if r["step"] > 0]
    for r in recs:
        data = (out / r["image"]).read_bytes()
        assert sha256_bytes(data) == r["sha256"]
        assert r["thought_summary"] == "looks fine" and r["input_tokens"] == 7
        assert json.loads(r["editor_info"])["surprise"] == 1.5  # unknown keys kept in editor_info
    # Same pixels as the plain simulated editor (only the PNG encoding differs).
    plain = tmp_path / "plain"
    run(sources, plain, steps=2)
    for r in recs:
        assert np.array_equal(load_rgb(out / r["image"]), load_rgb(plain / r["image"]))


class MinimalEditor(Editor):
    """Only `edit`: every other hook keeps the base class's default (a free, local editor)."""

    name, model = "minimal", "minimal-v1"

    def edit(self, request):
        return EditResult(image=np.ascontiguousarray(request.image[:, ::-1]), metadata={"finish_reason": "STOP"})


class HookEditor(MinimalEditor):
    """Records the hooks the runner calls, and refuses a config key."""

    def __init__(self):
        self.calls = []

    def check_config(self, config):
        self.calls.append("check_config")
        if "forbidden" in config:
            raise Banana100Error("forbidden config key")

    def connect(self):
        self.calls.append("connect")

    def request_config(self, config, seed):
        return {"described": True, "seed": seed}


def test_editor_contract_defaults(sources, tmp_path):
    """An editor that writes only `edit` runs: free (no cost line, no calls.jsonl), its config as is."""
    ed = MinimalEditor()
    assert (ed.metered, ed.price, ed.estimate_usd({}), ed.request_config({"a": 1}, 5)) == (False, FREE, None, {"a": 1})
    assert ed.check_config({"a": 1}) is None and ed.connect() is None
    text = run(sources, tmp_path / "dry", steps=2, editor=ed, dry_run=True)
    assert "estimated cost" not in text and "config: {}" in text
    out = tmp_path / "run"
    summary = run(sources, out, steps=2, editor=ed, max_cost=1.0)  # a free editor takes a cap
    assert summary.written == 6 and summary.cost_usd is None
    assert not (out / "calls.jsonl").exists()
    # The runner calls each hook itself: check_config before anything, connect before writing.
    hooks = HookEditor()
    assert "config: {\"described\": true" in run(sources, tmp_path / "dry2", steps=1, editor=hooks, dry_run=True)
    assert hooks.calls == ["check_config"]  # a dry run connects to nothing
    run(sources, tmp_path / "run2", steps=1, editor=hooks)
    assert hooks.calls == ["check_config", "check_config", "connect"]
    bad = Setting("bad", "", ("Copy.",), {"forbidden": 1})
    with pytest.raises(Banana100Error, match="forbidden"):
        run(sources, tmp_path / "run3", setting=bad, editor=hooks)
    assert not (tmp_path / "run3").exists()


def test_cli_prints_summary(sources, tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "generate",
        "--editor",
        "simulated",
        "--sources",
        str(sources),
        "--setting",
        "replicate",
        "--steps",
        "2",
        "--repeats",
        "1",
        "--out",
        str(out),
    ]
    assert cli_main(argv) == 0
    printed = capsys.readouterr().out
    assert "run folder:" in printed and "images written this run: 6" in printed
    assert cli_main(argv[:-1] + [str(out)]) == 0
    assert "already present: 6" in capsys.readouterr().out
    assert cli_main(argv[:6] + ["mirror"] + argv[7:]) == 2
    assert "different setting" in capsys.readouterr().err
    assert cli_main(["generate", "--editor", "nope", "--sources", str(sources), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "known editors: bfl, diffusers, gemini, openai, simulated, xai" in err and "path/to/file.py:Class" in err


def test_open_editor_batch_size_defaults_to_one(tmp_path, monkeypatch, capsys):
    """One image per pipeline call unless --batch-size asks for more: batching chains does not pay
    at real sizes on a GPU (BENCHMARKS.md, "Open editors at real size")."""
    import inspect

    from banana100.chains import editors
    from banana100.chains.editors.diffusion import DiffusersEditor
    from banana100.errors import UsageError

    seen = []

    def make_editor(name, **options):
        seen.append(options)
        raise UsageError("stop before any work")

    monkeypatch.setattr(editors, "make_editor", make_editor)
    argv = ["generate", "--editor", "diffusers", "--model", "m", "--sources", str(tmp_path),
            "--out", str(tmp_path / "o")]
    assert cli_main(argv) == 2 and cli_main(argv + ["--batch-size", "4"]) == 2
    assert [o["max_batch"] for o in seen] == [1, 4]
    assert "stop before any work" in capsys.readouterr().err
    assert inspect.signature(DiffusersEditor).parameters["max_batch"].default == 1  # the Python API's too
    assert DiffusersEditor(model="m").max_batch == 1 and DiffusersEditor(model="m", max_batch=4).max_batch == 4


# -- real processes: SIGKILL and Ctrl-C ----------------------------------------------------


def cli_cmd(sources, out, steps, repeats):
    return [
        sys.executable,
        "-m",
        "banana100",
        "generate",
        "--editor",
        "simulated",
        "--sources",
        str(sources),
        "--setting",
        "replicate",
        "--steps",
        str(steps),
        "--repeats",
        str(repeats),
        "--out",
        str(out),
        "--concurrency",
        "3",
    ]


def manifest_lines(out: Path) -> int:
    try:
        return (out / MANIFEST_NAME).read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _ctrl_c_delivered():
    # pytest started as a background job (`cmd &` in a script) inherits an ignored SIGINT, and so
    # would the run; an interactive Ctrl-C reaches it, which is what the test plays
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_and_wait(cmd, out, min_lines, env, log):
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log, preexec_fn=_ctrl_c_delivered)
    deadline = time.monotonic() + 60
    while manifest_lines(out) < min_lines:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"generate ended or stalled before writing {min_lines} records (rc={proc.returncode})")
        time.sleep(0.02)
    return proc


@pytest.mark.integration  # a runner process killed and resumed (~4 s each)
@pytest.mark.parametrize("how", ["sigkill", "sigint"])
def test_interrupted_process_resumes_exactly(tmp_path, how):
    sources = tmp_path / "sources"
    sources.mkdir()
    write_source(sources / "alpha.png", seed=1)
    steps, repeats = 30, 3
    total = repeats * (steps + 1)
    out = tmp_path / "run"
    # BANANA100_SIMULATED_DELAY_S slows each step, so the process is surely mid-run when stopped.
    env = dict(os.environ, **{DELAY_ENV: "0.03"})
    cmd = cli_cmd(sources, out, steps, repeats)
    with open(tmp_path / "log1.txt", "wb") as log:
        proc = start_and_wait(cmd, out, 12, env, log)
        if how == "sigkill":
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(30) == -signal.SIGKILL
        else:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 130
    if how == "sigint":
        assert "rerun the same command to resume" in (tmp_path / "log1.txt").read_text()
    done_before = len(read_manifest(out))
    assert 12 <= done_before < total

    with open(tmp_path / "log2.txt", "wb") as log:
        rerun = subprocess.run(
            cmd, check=False, cwd=REPO, env=dict(os.environ), stdout=subprocess.PIPE, stderr=log, timeout=120
        )
    assert rerun.returncode == 0, (tmp_path / "log2.txt").read_text()
    assert f"images written this run: {total - done_before}" in rerun.stdout.decode()
    check_run(out, n_chains=repeats, steps=steps)
    assert not list(out.glob("*/.step_*"))  # no temporary files left behind

    # Identical to an uninterrupted run with the same seed.
    fresh = tmp_path / "fresh"
    run(sources, fresh, steps=steps, repeats=repeats, concurrency=3)
    for rec in read_manifest(fresh):
        assert (out / rec["image"]).read_bytes() == (fresh / rec["image"]).read_bytes(), rec["image"]


def test_a_step_records_the_pipelines_own_step_count_when_none_is_given():
    """A step made without --inference-steps records the denoising steps that made it (the
    pipeline's default, from its signature), and one made with it the value given."""
    from types import SimpleNamespace

    from banana100.chains.editors.base import EditRequest
    from banana100.chains.editors.diffusion import DiffusersEditor

    class StandInPipeline:
        def __call__(self, image, prompt, height, width, output_type, generator, num_inference_steps=28,
                     guidance_scale=3.5, **options):
            self.steps = num_inference_steps
            return SimpleNamespace(images=np.zeros((1, height, width, 3), np.float32))

    request = EditRequest(image=np.zeros((64, 64, 3), np.uint8), prompt="copy", seed=1)
    pipe = StandInPipeline()
    info = DiffusersEditor(pipeline=pipe).edit(request).metadata["editor_info"]
    assert (info["num_inference_steps"], info["guidance_scale"], pipe.steps) == (28, 3.5, 28)
    info = DiffusersEditor(pipeline=pipe, num_inference_steps=4).edit(request).metadata["editor_info"]
    assert (info["num_inference_steps"], pipe.steps) == (4, 4)
