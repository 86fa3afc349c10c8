"""`banana100 weights list | download | check`, offline: stubs stand in for the network."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from banana100.metrics import weights
from banana100.cli import main as cli_main
from banana100.metrics.table import ROSTER, get_metric
from banana100.cli.weights import inventory

from fixtures.repopaths import PARAMS
needs_params = pytest.mark.skipif(not (PARAMS / "niqe_modelparameters.mat").is_file(), reason=f"needs niqe_modelparameters.mat in {PARAMS} (`banana100 weights download niqe --to DIR` online)")


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))
    monkeypatch.delenv(weights.ENV_VAR, raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return tmp_path


def run(capsys, *argv) -> tuple[int, str]:
    try:
        code = cli_main(["weights", *argv])
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_inventory_covers_every_file_of_every_metric_once():
    inv = inventory(list(ROSTER))
    names = [wf.filename for wf, _ in inv]
    assert len(names) == len(set(names))
    for m in ROSTER:
        for wf in get_metric(m).all_files:
            assert wf.filename in names
    users = {wf.filename: ms for wf, ms in inv}
    assert users["RN50.pt"] == ["clipiqa", "qualiclip"]
    assert users["resnet50-0676ba61.pth"] == ["tres", "arniqa"]
    assert set(users["niqe_modelparameters.mat"]) == {"niqe", "pi"}


def test_list_offline_names_every_file(capsys):
    code, out = run(capsys, "list")
    assert code == 0
    for wf, _ in inventory(list(ROSTER)):
        assert wf.filename in out
    assert "missing" in out and "files present" in out
    assert out.splitlines()[0].split() == ["FILE", "SIZE", "METRICS", "LICENCE", "STATUS"]


def test_list_json(capsys):
    code, out = run(capsys, "list", "--json", "tres")
    rows = json.loads(out)
    assert code == 0 and [r["file"] for r in rows] == ["tres_koniq-f0502926.pth", "resnet50-0676ba61.pth"]
    tv = rows[1]
    assert tv["url"] == "https://download.pytorch.org/models/resnet50-0676ba61.pth"
    assert tv["sha256_prefix"] == "0676ba61" and tv["cache"] == "torch" and tv["state"] == "missing"


def test_check_missing_exits_1_and_says_where(capsys, offline):
    code, out = run(capsys, "check", "clipiqa")
    assert code == 1
    assert "RN50.pt" in out and "$BANANA100_WEIGHTS/RN50.pt" in out
    assert "https://openaipublic.azureedge.net/clip/models/" in out
    assert str(offline / "torch-home" / "hub" / "clip" / "RN50.pt") in out  # CLIP's own cache
    assert "0/1 metrics ready" in out


@needs_params
def test_check_local_folder_mode(capsys, monkeypatch):
    monkeypatch.setenv(weights.ENV_VAR, str(PARAMS))
    code, out = run(capsys, "check", "niqe", "brisque", "ilniqe", "piqe")
    assert code == 0, out
    assert "4/4 metrics ready" in out


def test_check_catches_a_corrupt_file(capsys, monkeypatch, tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "resnet50-0676ba61.pth").write_bytes(b"truncated")
    (folder / "tres_koniq-f0502926.pth").write_bytes(b"no checksum known")
    monkeypatch.setenv(weights.ENV_VAR, str(folder))
    code, out = run(capsys, "check", "tres")
    assert code == 1
    assert re.search(r"^ok +tres_koniq-f0502926.pth", out, re.M)
    assert "bad-checksum resnet50-0676ba61.pth" in out and "0676ba61" in out


def test_unknown_metric_is_an_error(capsys):
    code, out = run(capsys, "check", "no-such-metric")
    assert code == 2 and "unknown metric" in out


def test_download_offline_fails_naming_the_file(capsys):
    code, out = run(capsys, "download", "cnniqa")
    assert code == 1
    assert "CNNIQA_koniq10k-e6f14c91.pth" in out and "HF_HUB_OFFLINE=1" in out


def test_download_needs_metric_names(capsys):
    code, out = run(capsys, "download")
    assert code == 2


def test_download_fetches_and_copies_to_a_folder(capsys, monkeypatch, tmp_path):
    """Online (stubbed): Hub files through huggingface_hub, torchvision files from their URL."""
    import huggingface_hub
    import huggingface_hub.constants as hf_constants
    import torch.hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(weights, "hub_unreachable", lambda timeout=3.0, url=None: "")
    fetched = []

    def fake_hf(repo_id, filename, **kwargs):
        fetched.append((repo_id, filename))
        p = tmp_path / "hf" / filename
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(b"checkpoint")
        return str(p)

    def fake_url(url, dst, hash_prefix=None, progress=True):
        fetched.append((url, Path(dst).name))
        Path(dst).write_bytes(b"backbone")  # wrong content: its sha256 prefix will not match

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_hf)
    monkeypatch.setattr(torch.hub, "download_url_to_file", fake_url)
    out_dir = tmp_path / "offline-folder"
    code, out = run(capsys, "download", "cnniqa", "--to", str(out_dir))
    assert code == 0, out
    assert (out_dir / "CNNIQA_koniq10k-e6f14c91.pth").read_bytes() == b"checkpoint"
    assert fetched == [("chaofengc/IQA-PyTorch-Weights", "CNNIQA_koniq10k-e6f14c91.pth")]

    code, out = run(capsys, "download", "paq2piq")
    assert code == 1  # the torchvision file "downloaded" but failed its sha256 prefix
    assert ("https://download.pytorch.org/models/resnet18-f37072fd.pth", "resnet18-f37072fd.pth") in fetched
    assert "f37072fd" in out


def test_timm_backbone_comes_from_its_own_hub_repo(capsys, monkeypatch, tmp_path):
    import huggingface_hub
    import huggingface_hub.constants as hf_constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(weights, "hub_unreachable", lambda timeout=3.0, url=None: "")
    calls = []

    def fake_hf(repo_id, filename, **kwargs):
        calls.append((repo_id, filename))
        p = tmp_path / repo_id.replace("/", "--") / filename
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
        return str(p)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_hf)
    code, out = run(capsys, "download", "hyperiqa", "--to", str(tmp_path / "dest"))
    assert code == 0, out
    assert ("timm/resnet50.a1_in1k", "model.safetensors") in calls
    assert (tmp_path / "dest" / "resnet50.a1_in1k.safetensors").is_file()  # renamed: one flat folder


def test_one_error_per_metric_names_every_missing_file():
    """topiq_nr lacks its checkpoint and its backbone: one error names both (not one per run)."""
    from banana100.errors import WeightsNotFoundError

    files = [wf.filename for wf in get_metric("topiq_nr").backend_files()]
    assert len(files) == 2
    with pytest.raises(WeightsNotFoundError) as exc:
        weights.files_for("topiq_nr")
    msg = str(exc.value)
    assert all(f in msg for f in files) and "lacks 2 files" in msg and "\n" not in msg
    assert "banana100 weights download topiq_nr" in msg
    assert len(msg) < 600  # each file: where to put it and its URL, no more


def test_check_prints_one_line_per_file(capsys):
    code, out = run(capsys, "check", "topiq_nr", "niqe")
    lines = out.splitlines()
    assert code == 1
    per_file = [line for line in lines if line.startswith("missing")]
    assert len(per_file) == 3 and all(len(line) < 400 for line in per_file)
    assert lines[-1].startswith("put the missing files in $BANANA100_WEIGHTS") and "download topiq_nr niqe" in lines[-1]


def test_list_is_a_table_with_real_sizes_and_licences(capsys, monkeypatch, tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "NRQM_model.mat").write_bytes(b"x" * 1234)  # the table has no size for it: the disk says
    monkeypatch.setenv(weights.ENV_VAR, str(folder))
    code, out = run(capsys, "list", "niqe", "nrqm", "qualiclip")
    rows = {line.split()[0]: line for line in out.splitlines()[1:-1]}
    assert code == 0
    assert "8.35 kB" in rows["niqe_modelparameters.mat"] and "LIVE licence" in rows["niqe_modelparameters.mat"]
    assert "1.23 kB" in rows["NRQM_model.mat"] and str(folder / "NRQM_model.mat") in rows["NRQM_model.mat"]
    assert "CC BY-NC 4.0" in rows["QualiCLIP.pth"] and "unknown" in rows["QualiCLIP.pth"]
    assert "256 MB" in rows["RN50.pt"] and "MIT" in rows["RN50.pt"]
    assert not any(" 0M " in line or " ? " in line for line in rows.values())


@pytest.mark.integration
def test_list_is_quiet_on_a_closed_pipe(tmp_path):
    """`banana100 weights list | head -1`: the header, exit 0, nothing on stderr (was: Broken pipe)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_HOME": str(tmp_path / "th")}
    proc = subprocess.run(f"'{sys.executable}' -m banana100 weights list | head -1; exit ${{PIPESTATUS[0]}}",
                          shell=True, executable="/bin/bash", capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.split() == ["FILE", "SIZE", "METRICS", "LICENCE", "STATUS"]
    assert proc.stderr == "" and proc.returncode == 0


def test_check_all_counts_every_metric_of_the_table(capsys, offline):
    """Issue 44 item 17: `weights check` said "1/21 metrics ready: piqe" although edit_damage needs no file."""
    from banana100.metrics.table import METRICS

    code, out = run(capsys, "check")
    ready = next(line for line in out.splitlines() if "metrics ready" in line)
    assert ready.startswith(f"{sum(not get_metric(m).all_files for m in METRICS)}/{len(METRICS)} metrics ready: ")
    assert "edit_damage" in ready and "piqe" in ready
