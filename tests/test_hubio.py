"""Issue 44 item 7: `push` and `publish-metrics` without a network: one `banana100 COMMAND: error:` line
(a 75-line traceback ending in httpx's ConnectError before), and no temporary folder left behind."""

from __future__ import annotations

import socket
import tempfile

import pytest

from banana100.cli import main


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """HF_HUB_OFFLINE unset (the tests set it), and every host name lookup failing, as on a machine offline."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def no_dns(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setenv("HF_TOKEN", "hf_TESTONLYtokenNOTreal0123456789")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path / "tmp"


def _one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"banana100 {command}: error: "), err
    assert "Traceback" not in err[0] and "hf_TESTONLY" not in err[0]
    return err[0]


def test_push_offline_is_one_line(tmp_path, capsys, no_network):
    from banana100.dataset.build import build_dataset
    from fixtures.runs import make_run

    make_run(tmp_path / "run", sources=("moss",), settings=("replicate",), steps=3)
    ds = build_dataset([tmp_path / "run"], tmp_path / "ds")
    capsys.readouterr()
    assert main(["push", str(ds), "--repo-id", "someone/chains", "--no-verify"]) == 1
    line = _one_error_line(capsys, "push")
    assert f"pushing {ds} to the dataset someone/chains: the Hub could not be reached (ConnectError" in line
    assert "run the command again" in line


def test_publish_metrics_offline_is_one_line_and_leaves_no_folder(capsys, no_network, monkeypatch):
    assert main(["publish-metrics", "--org", "someone", "--metrics", "piqe"]) == 1
    line = _one_error_line(capsys, "publish-metrics")
    assert "publishing piqe to the Space someone/piqe: the Hub could not be reached" in line
    assert list(no_network.glob("banana100-metrics-*")) == []  # none left behind
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    assert main(["publish-metrics", "--org", "someone", "--metrics", "piqe"]) == 1
    assert "HF_HUB_OFFLINE=1 is set, so nothing can be sent" in _one_error_line(capsys, "publish-metrics")
    assert main(["publish-metrics", "--org", "someone", "--metrics", "piqe", "--dry-run"]) == 0
    assert "staged in a temporary folder, removed once done" in capsys.readouterr().out
    assert list(no_network.glob("banana100-metrics-*")) == []
