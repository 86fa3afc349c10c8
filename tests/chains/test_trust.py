"""Issue 44 in the chains room: no paid step rests on an unchecked file, imports take the run
folder's lock, messages a user can act on; and the guards an audit found unguarded
(read_manifest's duplicate check, plan_chains' contiguity check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from banana100.chains.editors.gemini import GeminiEditor
from banana100.chains.editors.simulated import SimulatedEditor
from banana100.chains.importer import import_chains
from banana100.chains.manifest import MANIFEST_NAME, read_manifest
from banana100.chains.plan import collect_sources, plan_chains
from banana100.chains.runner import generate_chains
from banana100.chains.settings import get_setting
from banana100.chains.store import RunLock, run_parameters
from banana100.errors import Banana100Error, ChainsFailedError, ImportOptionError, ManifestError
from banana100.testing.gemini_standin import StandIn

from fixtures.repopaths import REPO

KEY = "AIzaSy-TEST-ONLY-KEY-trust-0123456789"


def run(sources, out, steps=2, editor=None, **kw):
    return generate_chains(editor or SimulatedEditor(), sources, "replicate", steps, 1, out, progress=False, **kw)


def write_manifest(out: Path, records: list[dict]) -> None:
    (out / MANIFEST_NAME).write_text("".join(json.dumps(r) + "\n" for r in records))


# -- the guards nothing guarded -----------------------------------------------------------------


def test_read_manifest_drops_an_exact_duplicate_and_refuses_a_different_one(sources, tmp_path):
    out = tmp_path / "run"
    run(sources, out)
    records = read_manifest(out)
    write_manifest(out, records + [records[2]])  # the same record twice: a replayed append
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_manifest(out) == records
    assert any("duplicate record" in str(w.message) for w in caught)
    other = dict(records[2], sha256="0" * 64)  # the same step with another image
    write_manifest(out, records + [other])
    with pytest.raises(ManifestError, match=f"line {len(records) + 1}: chain .* step {records[2]['step']} recorded twice with different"):
        read_manifest(out)


@pytest.mark.parametrize("steps_kept", [(0, 1, 3), (1, 2, 3), (0, 2, 3), (0, 1, 2, 4)])
def test_plan_chains_refuses_steps_that_do_not_run_from_0_without_gaps(steps_kept, sources, tmp_path):
    out = tmp_path / "run"
    run(sources, out, steps=4)
    setting = get_setting("replicate")
    cid = "alpha__replicate__r0"
    records = [r for r in read_manifest(out) if r["chain_id"] != cid or r["step"] in steps_kept]
    params = run_parameters(SimulatedEditor(), setting, 0)
    with pytest.raises(ManifestError, match=f"chain '{cid}' has steps .*, not a contiguous run from 0"):
        plan_chains(out, collect_sources(sources), setting, params, 6, 1, records)
    whole = read_manifest(out)  # and the whole chain plans
    assert {p.chain_id: p.next_step for p in plan_chains(out, collect_sources(sources), setting, params, 6, 1,
                                                         whole)}[cid] == 5


# -- step 0 and the images a chain goes on from ------------------------------------------------------


def replace_image(path: Path) -> None:
    Image.fromarray(np.full((40, 56, 3), 7, np.uint8) if "beta" in str(path) else
                    np.full((32, 32, 3), 7, np.uint8)).save(path)


def test_a_replaced_source_is_refused_before_any_step_simulated(sources, tmp_path):
    out = tmp_path / "run"
    run(sources, out, steps=2)
    step0 = out / "alpha__replicate__r0" / "step_000.png"
    replace_image(step0)
    lines = (out / MANIFEST_NAME).read_bytes()
    with pytest.raises(ManifestError, match=f"{step0}: its bytes do not match .*the chain's source.*nothing was sent"):
        run(sources, out, steps=4)
    assert (out / MANIFEST_NAME).read_bytes() == lines  # nothing made


@pytest.fixture
def standin(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    for name in ("GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)
    with StandIn() as s:
        yield s


def gemini(server) -> GeminiEditor:
    return GeminiEditor(base_url=server.base_url, sleep=lambda s: None, timeout_s=5.0)


@pytest.mark.parametrize("step", [0, 1])
def test_same_chat_replaced_image_is_named_by_its_image_file_before_anything_is_sent(step, standin, sources,
                                                                                     tmp_path):
    out = tmp_path / "run"
    run([sources / "alpha.png"], out, steps=2, editor=gemini(standin), chat="same")
    image = out / "alpha__replicate__same-chat__r0" / f"step_{step:03d}.png"
    replace_image(image)
    n = len(standin.requests)
    with pytest.raises(ManifestError) as info:
        run([sources / "alpha.png"], out, steps=4, editor=gemini(standin), chat="same")
    message = str(info.value)
    assert message.startswith(f"{image}: its bytes do not match") and ".turn.json" not in message
    assert len(standin.requests) == n  # not one paid request


def test_the_summary_does_not_say_rerun_where_a_rerun_cannot_help(standin, sources, tmp_path):
    """A same-chat chain recorded before turn_sha256 whose turn file is broken fails at its step; the
    rerun would meet the same file, so the summary asks to restore it instead."""
    out = tmp_path / "run"
    run([sources / "alpha.png"], out, steps=2, editor=gemini(standin), chat="same")
    write_manifest(out, [{k: v for k, v in r.items() if k != "turn_sha256"} for r in read_manifest(out)])
    (out / "alpha__replicate__same-chat__r0" / "step_001.turn.json").write_text("{not json")
    with pytest.raises(ChainsFailedError) as info:
        run([sources / "alpha.png"], out, steps=3, editor=gemini(standin), chat="same")
    message = str(info.value)
    assert "a rerun cannot help until the files named below are restored" in message
    assert "rerun the same command to retry" not in message and "step_001.turn.json" in message


# -- import-chains: the lock, the names --------------------------------------------------------------


def release_folder(root: Path, chains: int = 2, steps: int = 5) -> Path:
    for c in range(chains):
        for k in range(steps + 1):
            path = root / f"c{c}" / f"step_{k:03d}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.full((16, 16, 3), 10 * c + k, np.uint8)).save(path)
    return root


def test_import_takes_the_run_folders_lock(tmp_path):
    folder = release_folder(tmp_path / "release")
    out = tmp_path / "run"
    out.mkdir()
    with RunLock(out), pytest.raises(Banana100Error, match=f"{out} is in use by another"):
        import_chains(folder, "{chain}/step_{step:03d}.png", out)
    assert not (out / MANIFEST_NAME).exists()
    summary = import_chains(folder, "{chain}/step_{step:03d}.png", out)  # once free, it goes on
    assert summary.imported == 12
    with RunLock(out), pytest.raises(Banana100Error, match="in use"):  # and a generate waits for it, too
        import_chains(folder, "{chain}/step_{step:03d}.png", out)


@pytest.mark.integration
def test_two_imports_at_once_never_double_a_row(tmp_path):
    folder = release_folder(tmp_path / "release", chains=6, steps=9)
    other = release_folder(tmp_path / "other", chains=6, steps=9)
    env = dict(os.environ)
    for trial in range(3):
        out = tmp_path / f"run{trial}"
        cmds = [[sys.executable, "-m", "banana100", "import-chains", str(f), "--pattern", "{chain}/step_{step:03d}.png",
                 "--out", str(out)] for f in ((folder, folder) if trial < 2 else (folder, other))]
        procs = [subprocess.Popen(c, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for c in cmds]
        results = [(p.wait(120), p.stderr.read().decode()) for p in procs]
        records = read_manifest(out)
        keys = [(r["chain_id"], r["step"]) for r in records]
        assert len(keys) == len(set(keys))  # never a step twice
        assert len(records) in (60, 0) or all(rc == 0 for rc, _ in results)
        for rc, err in results:
            assert rc == 0 or ("is in use by another" in err and len(err.strip().splitlines()) == 1), err


def test_a_variant_name_states_its_first_character_rule(tmp_path):
    folder = release_folder(tmp_path / "release", chains=1, steps=1)
    with pytest.raises(ImportOptionError, match="--variant: the variant '_gpt' is not a usable name: letters, digits, "
                                                r"_ \. - only, starting with a letter or a digit"):
        import_chains(folder, "{chain}/step_{step:03d}.png", tmp_path / "run", variant="_gpt")
