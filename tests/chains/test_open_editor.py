"""The diffusers editor (`--editor diffusers`) on tiny random pipelines built offline.

The pipelines (banana100/testing/tinypipes.py) have the released models' classes (Flux2Pipeline,
QwenImageEditPlusPipeline) with a few random weights; each is built once per session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from banana100.chains.batching import BatchGate
from banana100.chains.editors import make_editor
from banana100.chains.editors.base import EditRequest
from banana100.chains.manifest import MANIFEST_NAME, read_manifest
from banana100.chains.runner import generate_chains
from banana100.errors import MissingExtraError, UsageError, WeightsNotFoundError
from banana100.imageio import encode_png

pytest.importorskip("diffusers", reason="the diffusers extra is not installed (pip install -e '.[diffusers]')")
pytestmark = pytest.mark.integration  # building the pipelines imports diffusers and transformers (~10 s)

from fixtures.repopaths import REPO

from banana100.testing import tinypipes  # noqa: E402

FLUX2_CALL = {"num_inference_steps": 2, "max_sequence_length": 64,
              "pipeline_options": {"text_encoder_out_layers": (1,)}}  # the tiny encoder has one layer


@pytest.fixture(scope="session")
def flux2():
    return tinypipes.tiny_flux2()


@pytest.fixture(scope="session")
def qwen_folder(tmp_path_factory):
    """The tiny Qwen-Image-Edit-Plus pipeline saved as a diffusers folder (what --model takes)."""
    folder = tmp_path_factory.mktemp("tiny-qwen-edit-plus")
    tinypipes.tiny_qwen_edit_plus().save_pretrained(folder)
    return folder


def noise_image(h, w, seed):
    return (np.random.default_rng(seed).random((h, w, 3)) * 255).astype(np.uint8)


@pytest.fixture()
def sources(tmp_path):
    folder = tmp_path / "sources"
    folder.mkdir()
    # sizes not multiples of 16: the "source" policy rounds them down once, at step 1
    (folder / "wide.png").write_bytes(encode_png(noise_image(70, 100, 1)))
    (folder / "tall.png").write_bytes(encode_png(noise_image(96, 64, 2)))
    return folder


def hashes(run_dir: Path) -> dict:
    return {(r["chain_id"], r["step"]): r["sha256"] for r in read_manifest(run_dir)}


def test_flux2_chain_batched_across_chains_equals_one_by_one(flux2, sources, tmp_path):
    batched = make_editor("diffusers", model="tiny-flux2", pipeline=flux2, max_batch=4, **FLUX2_CALL)
    calls = []
    batched.edit_batch = (lambda f: lambda reqs: calls.append(len(reqs)) or f(reqs))(batched.edit_batch)
    summary = generate_chains(batched, sources, "reworded", steps=3, repeats=2, out_dir=tmp_path / "batched",
                              concurrency=4, progress=False)
    assert summary.written == 4 * 4 and summary.chains_complete == 4
    # 4 chains, 2 sizes: every step's call carries the 2 chains of one size
    assert sorted(calls) == [2] * 6

    # each batched step against the same request made alone (its stored parent, prompt and seed):
    # equal up to float rounding in the batched matrix products (a pixel level now and then)
    from banana100.imageio import load_rgb

    single = make_editor("diffusers", model="tiny-flux2", pipeline=flux2, max_batch=1, **FLUX2_CALL)
    by_sha = {r["sha256"]: r for r in read_manifest(tmp_path / "batched")}
    differing = []
    for r in by_sha.values():
        if r["step"] == 0:
            continue
        parent = load_rgb(tmp_path / "batched" / by_sha[r["parent_sha256"]]["image"])
        alone = single.edit(EditRequest(image=parent, prompt=r["prompt"], seed=r["seed"])).image
        got = load_rgb(tmp_path / "batched" / r["image"])
        diff = np.abs(alone.astype(int) - got)
        assert diff.max() <= 1, (r["chain_id"], r["step"], diff.max())
        differing.append(np.count_nonzero(diff) / diff.size)
    assert max(differing) < 1e-3

    records = read_manifest(tmp_path / "batched")
    sizes = {(r["source_id"], r["step"]): (r["width"], r["height"]) for r in records}
    assert sizes[("wide", 0)] == (100, 70) and sizes[("wide", 1)] == (96, 64) == sizes[("wide", 3)]
    assert sizes[("tall", 0)] == (64, 96) == sizes[("tall", 3)]
    steps = {(r["chain_id"], r["step"]): r for r in records}
    one = steps[(records[-1]["chain_id"], 2)]
    assert one["prompt"] == "Copy this image exactly, changing nothing."  # the setting's step-2 prompt
    assert '"batch": 2' in one["editor_info"] and '"pipeline": "Flux2Pipeline"' in one["editor_info"]
    # different chains and steps differ (each has its own seed)
    assert len({r["sha256"] for r in records if r["step"] > 0}) == 12


def test_flux2_batch_is_per_sample(flux2):
    """Each sample of a batch sees its own image: the same as it alone (up to float rounding of
    the batched products, a pixel level now and then), not the batch's first image."""
    editor = make_editor("diffusers", model="tiny-flux2", pipeline=flux2, max_batch=4, **FLUX2_CALL)
    calls = []
    editor._call = (lambda f: lambda reqs: calls.append(len(reqs)) or f(reqs))(editor._call)
    requests = [EditRequest(image=noise_image(64, 80, i), prompt="copy", seed=7) for i in range(3)]
    together = editor.edit_batch(requests)
    assert calls == [3]  # one call for the three
    for request, result in zip(requests, together, strict=True):
        diff = np.abs(result.image.astype(int) - editor.edit(request).image)
        assert diff.max() <= 1 and np.count_nonzero(diff) < 1e-3 * diff.size
    assert not np.array_equal(together[0].image, together[1].image)  # same seed and prompt, other image


def test_fixed_seed_policy_and_sizes(flux2):
    editor = make_editor("diffusers", model="tiny-flux2", pipeline=flux2, size="native", native_area=128 * 128,
                         **FLUX2_CALL)
    out = editor.edit(EditRequest(image=noise_image(70, 140, 3), prompt="copy", seed=1))
    assert out.image.shape == (80, 176, 3)  # ~128*128 px at 2:1, rounded down to multiples of 16
    with pytest.raises(UsageError, match="temperature"):
        editor.check_config({"temperature": 0.5})


def test_qwen_edit_plus_chain_from_a_folder_and_resume_after_kill(qwen_folder, sources, tmp_path):
    import diffusers.pipelines.qwenimage.pipeline_qwenimage_edit_plus as qwen_plus

    (sources / "tall.png").unlink()  # one chain: Qwen-Image-Edit-Plus takes one image per call
    cmd = [sys.executable, "-m", "banana100", "generate", "--editor", "diffusers", "--model", str(qwen_folder),
           "--device", "cpu", "--inference-steps", "2", "--sources", str(sources), "--steps", "6",
           "--out", str(tmp_path / "killed")]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with open(tmp_path / "log.txt", "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 240
        manifest = tmp_path / "killed" / MANIFEST_NAME
        while not manifest.is_file() or manifest.read_bytes().count(b"\n") < 3:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"generate ended before 3 records: {(tmp_path / 'log.txt').read_text()[-2000:]}")
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    done = len(read_manifest(tmp_path / "killed"))
    assert 3 <= done < 7

    before = qwen_plus.VAE_IMAGE_SIZE
    editor = make_editor("diffusers", model=str(qwen_folder), device="cpu", num_inference_steps=2)
    summary = generate_chains(editor, sources, "replicate", steps=6, repeats=1, out_dir=tmp_path / "killed",
                              progress=False)
    assert summary.written == 7 - done and summary.chains_complete == 1
    assert qwen_plus.VAE_IMAGE_SIZE == before  # set per call (the output's area), then restored
    assert editor.max_batch == 1
    fresh = generate_chains(editor, sources, "replicate", steps=6, repeats=1, out_dir=tmp_path / "fresh",
                            progress=False)
    assert fresh.written == 7
    assert hashes(tmp_path / "killed") == hashes(tmp_path / "fresh")
    records = read_manifest(tmp_path / "fresh")
    assert [(r["width"], r["height"]) for r in records][1:] == [(96, 64)] * 6
    assert '"pipeline": "QwenImageEditPlusPipeline"' in records[1]["editor_info"]


def test_inference_steps_and_guidance_are_fixed_for_the_run_folder(flux2, sources, tmp_path):
    """--inference-steps and --guidance are recorded in run.json; a resume with other values (or
    without them) is one error naming the option and both values, before any pipeline is loaded."""
    import json

    from banana100.chains.store import RUN_FILE
    from banana100.errors import RunMismatchError

    (sources / "tall.png").unlink()
    out = tmp_path / "run"
    editor = make_editor("diffusers", model="tiny-flux2", pipeline=flux2, **FLUX2_CALL)  # 2 denoising steps
    generate_chains(editor, sources, "replicate", steps=1, repeats=1, out_dir=out, progress=False)
    params = json.loads((out / RUN_FILE).read_text())
    assert (params["num_inference_steps"], params["guidance_scale"]) == (2, None)
    assert json.loads(read_manifest(out)[1]["editor_info"])["num_inference_steps"] == 2
    before = (out / MANIFEST_NAME).read_bytes()

    # the CLI with the recorded model name, which is nowhere on disk or in the cache: loading it
    # would fail, so an error about the options shows that they are checked first
    env = dict(os.environ, PYTHONPATH=str(REPO))
    base = [sys.executable, "-m", "banana100", "generate", "--editor", "diffusers", "--model", "tiny-flux2",
            "--device", "cpu", "--sources", str(sources), "--steps", "2", "--out", str(out)]
    for extra, given, fix in ((["--inference-steps", "3"], "--inference-steps 3", "give --inference-steps 2"),
                              ([], "no --inference-steps (the default)", "give --inference-steps 2")):
        r = subprocess.run(base + extra, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert r.returncode == 2, r.stderr
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("banana100 generate: error:"), r.stderr
        recorded = f"made with --inference-steps 2 (num_inference_steps=2 in {RUN_FILE})"
        assert f"{recorded}, but this command gives {given}" in lines[0] and fix in lines[0]

    guided = make_editor("diffusers", model="tiny-flux2", pipeline=flux2, guidance_scale=2.5, **FLUX2_CALL)
    guided.edit_batch = lambda requests: pytest.fail("a step was made")
    with pytest.raises(RunMismatchError, match=r"made with no --guidance \(guidance_scale=null in run.json\), but "
                                               r"this command gives --guidance 2\.5\. .*leave --guidance out"):
        generate_chains(guided, sources, "replicate", steps=2, repeats=1, out_dir=out, progress=False)
    assert (out / MANIFEST_NAME).read_bytes() == before
    assert generate_chains(editor, sources, "replicate", steps=2, repeats=1, out_dir=out,
                           progress=False).written == 1  # the recorded values resume


def test_gate_batches_only_what_can_share_a_call():
    """The gate never waits for a chain that has left, and keeps different sizes apart."""
    from banana100.chains.editors.base import Editor, EditResult

    class Recorder(Editor):
        name, model, max_batch = "rec", "rec", 8

        def __init__(self):
            self.batches = []

        def edit(self, request):
            return self.edit_batch([request])[0]

        def edit_batch(self, requests):
            self.batches.append([r.seed for r in requests])
            return [EditResult(image=r.image) for r in requests]

    import threading

    rec = Recorder()
    gate = BatchGate(rec)
    shapes = [(16, 16), (16, 16), (8, 8)]
    for _ in shapes:
        gate.join()

    def chain(i, shape):
        try:
            for step in range(3 if i else 1):  # chain 0 stops after one step and leaves
                gate.edit(EditRequest(image=np.zeros(shape + (3,), np.uint8), prompt="p", seed=i * 10 + step))
        finally:
            gate.leave()

    threads = [threading.Thread(target=chain, args=(i, s)) for i, s in enumerate(shapes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert sorted(sum(rec.batches, [])) == [0, 10, 11, 12, 20, 21, 22]
    assert any(sorted(b) == [0, 10] for b in rec.batches)  # the two 16x16 chains shared their first step
    assert all(len({s // 10 for s in b}) == len(b) for b in rec.batches)  # one request per chain per call
    assert not any({1, 2} <= {s // 10 for s in b} for b in rec.batches)  # 16x16 and 8x8 never together


def test_missing_weights_and_extra_are_one_line(tmp_path, monkeypatch):
    editor = make_editor("diffusers", model="someone/not-downloaded-model")
    with pytest.raises(WeightsNotFoundError) as e:
        editor.connect()
    assert "someone/not-downloaded-model" in str(e.value) and "hf download" in str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(WeightsNotFoundError, match="model_index.json"):
        make_editor("diffusers", model=str(tmp_path)).connect()
    with pytest.raises(UsageError, match="--model"):
        make_editor("diffusers")

    from banana100 import extras

    monkeypatch.setattr(extras, "extra_installed", lambda extra: extra != "diffusers")
    with pytest.raises(MissingExtraError, match=r"'diffusers' extra"):
        make_editor("diffusers", model="x/y").connect()


def test_cli_dry_run_and_missing_model(sources, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    base = [sys.executable, "-m", "banana100", "generate", "--editor", "diffusers", "--sources", str(sources),
            "--steps", "3", "--out", str(tmp_path / "run")]
    dry = subprocess.run(base + ["--model", "Qwen/Qwen-Image-Edit-2511", "--dry-run", "--size", "native"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert "diffusers (Qwen/Qwen-Image-Edit-2511)" in dry.stdout and "size_policy" in dry.stdout
    assert not (tmp_path / "run").exists()
    missing = subprocess.run(base + ["--model", "someone/not-downloaded-model"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1
    lines = [ln for ln in missing.stderr.splitlines() if "error:" in ln]
    assert len(lines) == 1 and "someone/not-downloaded-model" in lines[0], missing.stderr


@pytest.mark.parametrize("gpu", [False, True])
def test_space_offers_the_open_editor_only_with_a_gpu(gpu, monkeypatch):
    """'Try it' lists `open` where torch sees a GPU (ZeroGPU makes it so) and says plainly when none is."""
    pytest.importorskip("gradio", reason="the space extra is not installed")
    import importlib.util

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    spec = importlib.util.spec_from_file_location("banana100_space_app_gpu", REPO / "space" / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    assert app.OPEN is gpu
    assert ("open" in app.MAX_STEPS) is gpu
    if gpu:
        assert "pick `open`" in app.OPEN_NOTE and app.OPEN_MODEL in app.OPEN_NOTE
    else:
        assert "this Space has none" in app.OPEN_NOTE and "--editor diffusers" in app.OPEN_NOTE
        with pytest.raises(app.gr.Error, match="choose an editor"):
            next(app.run_live(None, app.ex.sample_names()[0], 3, "open", ""))
