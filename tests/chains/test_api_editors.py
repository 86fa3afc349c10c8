"""The openai, xai and bfl editors against the loopback stand-in of their APIs
(banana100/testing/image_api_standin.py): the happy path, each fault, the cost cap, the key, a
--dry-run without the extra or the key, and SIGKILLs that lose, double and re-pay nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from banana100.chains.budget import CALLS_FILE, ledger_totals
from banana100.chains.editors import make_editor
from banana100.chains.manifest import MANIFEST_NAME, read_manifest
from banana100.chains.runner import generate_chains
from banana100.chains.store import STOPPED_FILE, read_stopped
from banana100.cli import main as cli_main
from banana100.errors import BudgetExceeded, ChainsFailedError, MissingExtraError, RunStopped
from banana100.testing.image_api_standin import ImageAPIStandIn
from banana100.testing.runfolder import write_source

from fixtures.repopaths import REPO
from fixtures.runs import check_chains
from kill_harness import kill_after, on_disk

KINDS = {
    "openai": {"env": "OPENAI_API_KEY", "url": "openai_url", "api": "openai_edit", "model": "gpt-image-1.5",
               "key": "sk-proj-TEST-ONLY-0a1b2c3d4e5f6a7b8c9d"},
    "xai": {"env": "XAI_API_KEY", "url": "xai_url", "api": "xai", "model": "grok-imagine-image",
            "key": "xai-TEST-ONLY-0a1b2c3d4e5f6a7b8c9d"},
    "bfl": {"env": "BFL_API_KEY", "url": "bfl_url", "api": "bfl", "model": "flux-2-pro",
            "key": "bfl-TEST-ONLY-0a1b2c3d4e5f6a7b8c9d"},
}
ALL = sorted(KINDS)


class Sleeps(list):
    def __call__(self, seconds):
        self.append(seconds)


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    for spec in KINDS.values():
        monkeypatch.setenv(spec["env"], spec["key"])
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def server():
    with ImageAPIStandIn(pending_polls=1) as s:
        yield s


def editor(kind: str, server, **kw):
    kw.setdefault("sleep", Sleeps())
    kw.setdefault("backoff_s", 1.0)
    kw.setdefault("timeout_s", 5.0)
    if kind == "bfl":
        kw.setdefault("poll_s", 0.0)
    return make_editor(kind, base_url=getattr(server, KINDS[kind]["url"]), **kw)


def run(ed, sources, out, steps=2, repeats=1, setting="replicate", **kw):
    return generate_chains(ed, sources, setting, steps, repeats, out, progress=False, **kw)


def asked(server, kind):
    return server.asked(KINDS[kind]["api"])


@pytest.mark.parametrize("kind", ALL)
def test_records_what_the_service_returns(kind, server, sources, tmp_path):
    out = tmp_path / "run"
    summary = run(editor(kind, server), sources, out, steps=2, concurrency=2)
    chains = check_chains(out, 2, 2)
    assert summary.written == 6 and summary.cost_usd > 0
    assert server.keys_seen == {KINDS[kind]["key"]}
    by_sha = {q["sha256"]: q for q in asked(server, kind)}
    for recs in chains.values():
        for r in recs[1:]:
            assert (r["editor"], r["model"]) == (kind, KINDS[kind]["model"])
            q = by_sha[r["parent_sha256"]]  # the stored bytes were sent
            assert q["prompt"] == r["prompt"] and r["attempts"] == 1 and r["cost_usd"] > 0
            assert json.loads(r["generation_config"])["model" if kind != "bfl" else "output_format"]
    assert ledger_totals(out / CALLS_FILE) == {"spent_usd": pytest.approx(summary.cost_usd), "calls": 4, "unfinished": 0}
    if kind == "openai":  # the cost of an answered edit comes from the usage it reports
        r = next(iter(chains.values()))[1]
        assert r["cost_usd"] == pytest.approx((20 * 5 + 1060 * 8 + 1056 * 32) / 1e6)
        assert (r["input_tokens"], r["output_tokens"]) == (1080, 1056)
    if kind == "bfl":  # the submit's own cost, in credits
        assert next(iter(chains.values()))[1]["cost_usd"] == pytest.approx(0.045)


@pytest.mark.parametrize("kind", ALL)
def test_faults_are_retried_and_bad_images_never_written(kind, server, sources, tmp_path):
    sleeps = Sleeps()
    server.script([{"status": 429, "retry_after": "7"}, {"status": 503}, {"truncated": True}, {"no_image": True}])
    out = tmp_path / "run"
    run(editor(kind, server, sleep=sleeps), [sources / "alpha.png"], out, steps=1)
    rec = [r for r in read_manifest(out) if r["step"] == 1][0]
    info = json.loads(rec["editor_info"])
    assert rec["attempts"] == 5
    assert info["faults"] == {"http_429": 1, "http_503": 1, "bad_image": 1, "no_image": 1}
    real = [s for s in sleeps if s > 0.2]  # bfl's polls sleep poll_s=0 between polls
    assert 7 <= real[0] <= 8 and 1.0 <= real[1] <= 2.0  # Retry-After, then the 2nd backoff, with jitter
    check_chains(out, 1, 1)
    assert server.responses.count("truncated") == 1


@pytest.mark.parametrize("kind", ALL)
def test_a_timeout_is_retried_and_charged_its_reservation(kind, server, sources, tmp_path):
    server.script([{"delay": 2.0}])
    out = tmp_path / "run"
    run(editor(kind, server, timeout_s=0.5), [sources / "alpha.png"], out, steps=1)
    rec = [r for r in read_manifest(out) if r["step"] == 1][0]
    assert json.loads(rec["editor_info"])["faults"] == {"timeout": 1} and rec["attempts"] == 2
    ends = [json.loads(x) for x in (out / CALLS_FILE).read_text().splitlines() if '"end"' in x]
    assert [e["outcome"] for e in ends] == ["timeout", "ok"] and ends[0]["cost_known"] is False


@pytest.mark.parametrize("kind", ALL)
def test_repeated_safety_refusals_stop_that_chain_only(kind, server, sources, tmp_path):
    server.rules.append((lambda q: q.get("height") == 40, {"safety": True}))  # beta.png is 56x40
    out = tmp_path / "run"
    summary = run(editor(kind, server, safety_retries=2), sources, out, steps=2)
    assert summary.chains_stopped == 1 and summary.chains_complete == 1
    stopped = read_stopped(out)
    assert list(stopped) == ["beta__replicate__r0"] and stopped["beta__replicate__r0"]["details"]["safety_blocks"] == 3
    assert "blocked for safety 3 times" in stopped["beta__replicate__r0"]["reason"]
    assert len([q for q in asked(server, kind) if q.get("height") == 40]) == 3


@pytest.mark.parametrize("kind", ALL)
def test_bad_key_stops_the_run_and_other_4xx_fail_the_step(kind, server, sources, tmp_path):
    server.script([{"status": 401}])
    with pytest.raises(RunStopped, match="HTTP 401"):
        run(editor(kind, server), [sources / "alpha.png"], tmp_path / "run", steps=1)
    server.script([{"status": 400}])
    with pytest.raises(ChainsFailedError, match="HTTP 400.*not retried"):
        run(editor(kind, server), [sources / "alpha.png"], tmp_path / "run2", steps=1)


@pytest.mark.parametrize("kind", ALL)
def test_missing_key_fails_before_anything_is_written(kind, monkeypatch, server, sources, tmp_path):
    monkeypatch.delenv(KINDS[kind]["env"])
    with pytest.raises(RunStopped, match=f"no API key: set {KINDS[kind]['env']}"):
        run(editor(kind, server), sources, tmp_path / "run")
    assert not (tmp_path / "run").exists() and not server.requests


@pytest.mark.parametrize("kind", ALL)
def test_dry_run_needs_neither_the_extra_nor_the_key(kind, monkeypatch, sources, tmp_path, capsys):
    monkeypatch.delenv(KINDS[kind]["env"])
    monkeypatch.setitem(sys.modules, "openai", None)  # the openai extra is not installed
    out = tmp_path / "run"
    code = cli_main(["generate", "--editor", kind, "--sources", str(sources), "--steps", "10", "--out", str(out),
                     "--max-cost", "1", "--dry-run"])
    text = capsys.readouterr().out
    assert code == 0 and "estimated cost: $" in text and "a step" in text and not out.exists()
    if kind == "openai":
        with pytest.raises(MissingExtraError, match="pip install .*openai"):
            generate_chains(make_editor("openai"), sources, "replicate", 1, 1, out, progress=False)
        assert not out.exists()


@pytest.mark.parametrize("kind", ALL)
def test_cost_cap_stops_cleanly(kind, server, sources, tmp_path):
    ed = editor(kind, server)
    reserve = ed.estimate_usd({})[1]
    cap = 2.5 * reserve
    out = tmp_path / "run"
    with pytest.raises(BudgetExceeded):
        run(ed, [sources / "alpha.png"], out, steps=10, max_cost=cap, concurrency=1)
    assert ledger_totals(out / CALLS_FILE)["spent_usd"] <= cap
    assert 2 <= len(read_manifest(out)) - 1 < 10


def test_prices_per_size_and_quality(server, sources, tmp_path):
    low, high = make_editor("openai", quality="low"), make_editor("openai", quality="high")
    assert low.estimate_usd({}) == pytest.approx((0.009 + 0.0085, 0.013 + 0.0085))
    assert high.estimate_usd({}) == pytest.approx((0.133 + 0.0085, 0.2 + 0.0085))
    assert make_editor("bfl", model="flux-2-max").estimate_usd({})[0] == pytest.approx(0.10)
    with pytest.raises(RunStopped, match="image_size '4K' is not possible"):
        run(make_editor("openai"), sources, tmp_path / "run", setting="replicate_4k")
    # --quality is fixed for the run folder, like --model
    run(editor("openai", server, quality="low"), [sources / "alpha.png"], tmp_path / "q", steps=1)
    assert json.loads((tmp_path / "q" / "run.json").read_text())["quality"] == "low"
    from banana100.errors import RunMismatchError

    with pytest.raises(RunMismatchError, match="quality"):
        run(editor("openai", server, quality="high"), [sources / "alpha.png"], tmp_path / "q", steps=2)


# -- OpenAI's same chat ------------------------------------------------------------------------------


def test_openai_same_chat_follows_the_services_conversation(server, sources, tmp_path):
    out = tmp_path / "run"
    run(editor("openai", server), [sources / "alpha.png"], out, steps=3, chat="same")
    asked_ = server.asked("openai_responses")
    cid = "alpha__replicate__same-chat__r0"
    recs = sorted((r for r in read_manifest(out) if r["chain_id"] == cid), key=lambda r: r["step"])
    # step 1 sends the source; each later step only names the previous response
    assert [q["images_in"] for q in asked_] == [1, 0, 0]
    assert asked_[0]["previous_response_id"] is None
    ids = [json.loads(r["editor_info"])["response_id"] for r in recs[1:]]
    assert [q["previous_response_id"] for q in asked_[1:]] == ids[:2]
    assert all(not q["history_problems"] for q in asked_)
    assert [q["sha256"] for q in asked_] == [r["sha256"] for r in recs[:3]]  # each edits the previous answer
    costs = [r["cost_usd"] for r in recs[1:]]
    assert costs[0] < costs[1] < costs[2]  # the conversation's images are billed as input
    assert sorted(p.name for p in (out / cid).glob("*.turn.json")) == [f"step_00{k}.turn.json" for k in (1, 2, 3)]


def test_openai_same_chat_resumes_from_the_stored_turns(server, sources, tmp_path):
    run(editor("openai", server), [sources / "alpha.png"], tmp_path / "run", steps=2, chat="same")
    n = len(server.requests)
    run(editor("openai", server), [sources / "alpha.png"], tmp_path / "run", steps=4, chat="same")
    later = server.requests[n:]
    step2 = [r for r in read_manifest(tmp_path / "run") if r["step"] == 2][0]
    assert len(later) == 2 and later[0]["previous_response_id"] == json.loads(step2["editor_info"])["response_id"]
    assert later[0]["sha256"] == step2["sha256"]  # the conversation goes on from the stored step
    assert all(not q["history_problems"] for q in server.requests)


def test_openai_same_chat_lost_conversation_stops_the_chain(server, sources, tmp_path):
    run(editor("openai", server), [sources / "alpha.png"], tmp_path / "run", steps=1, chat="same")
    server.stored.clear()  # the service no longer holds it (30 days later)
    summary = run(editor("openai", server), [sources / "alpha.png"], tmp_path / "run", steps=2, chat="same")
    assert summary.chains_stopped == 1
    (entry,) = read_stopped(tmp_path / "run").values()
    assert "no longer holds this chain's conversation" in entry["reason"] and "new --out folder" in entry["reason"]
    assert (tmp_path / "run" / STOPPED_FILE).is_file()


# -- kills and keys ----------------------------------------------------------------------------------


def test_an_upload_cut_short_by_a_kill_never_reaches_the_service(server):
    """A client killed mid-upload sends fewer bytes than it announced: the stand-in, like a real
    service, neither records nor answers it (it used to crash on the half image)."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(server.openai_url)
    with socket.create_connection((url.hostname, url.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/images/edits HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b"
                     b"\r\nContent-Length: 5000\r\n\r\n--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\n"
                     b"copy\r\n--b\r\nContent-Disposition: form-data; name=\"ima")
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(1024) == b""  # closed without an answer
    assert server.requests == []


def test_an_edit_without_an_image_is_refused_like_the_service_does(server):
    import urllib.error
    import urllib.request

    body = b'--b\r\nContent-Disposition: form-data; name="prompt"\r\n\r\ncopy\r\n--b--\r\n'
    req = urllib.request.Request(server.openai_url + "/images/edits", data=body, method="POST",
                                 headers={"Content-Type": "multipart/form-data; boundary=b"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 400 and b"image is required" in err.value.read()


def cli_cmd(kind, base_url, sources, out, steps, *extra):
    return [sys.executable, "-m", "banana100", "generate", "--editor", kind, "--base-url", base_url, "--sources",
            str(sources), "--steps", str(steps), "--out", str(out), "--concurrency", "3", *extra]


def made_by(out: Path) -> dict:
    """The sha256 an input image had -> (chain, step) it was edited into, from the final manifest
    (distinct sources: each chain's lineage is unique)."""
    return {r["parent_sha256"]: (r["chain_id"], r["step"]) for r in read_manifest(out) if r["step"]}


@pytest.mark.integration
@pytest.mark.parametrize("kind, chat", [("openai", "different"), ("xai", "different"), ("bfl", "different"),
                                        ("openai", "same")])
def test_sigkill_and_resume_lose_double_and_repay_nothing(kind, chat, tmp_path):
    src = tmp_path / "sources"
    src.mkdir()
    for i in range(3):
        write_source(src / f"s{i}.png", seed=i + 1)
    steps, out = 8, tmp_path / "run"
    env = dict(os.environ, **{KINDS[kind]["env"]: KINDS[kind]["key"]})
    api = "openai_responses" if chat == "same" else KINDS[kind]["api"]
    with ImageAPIStandIn(latency_s=0.04, pending_polls=0) as server:
        cmd = cli_cmd(kind, getattr(server, KINDS[kind]["url"]), src, out, steps, "--chat", chat)
        kill_after(cmd, env, out, (6, 15), tmp_path / "log.txt")
        before = on_disk(out)
        n = len(server.requests)
        assert len(before) < 3 * (steps + 1)
        rerun = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=180, check=False)
        assert rerun.returncode == 0, rerun.stderr.decode()
        requests = list(server.requests)
    check_chains(out, 3, steps)
    which = made_by(out)
    again = [which[q["sha256"]] for q in requests[n:] if q["api"] == api]
    assert again and not set(again) & before  # no step on disk was asked (or paid) again
    assert len(again) == len(set(again))
    every = [which[q["sha256"]] for q in requests if q["api"] == api]
    # a step was asked again only when a kill found it unfinished. Writes are pipelined (runner.run_chain):
    # a chain may hold step k's answer, not yet on disk, while step k+1's call is in flight, so a kill can
    # cost a chain two steps, never more
    doubled = [s for s in set(every) if every.count(s) > 1]
    kills = 2
    assert max(Counter(chain for chain, _ in doubled).values(), default=0) <= 2 * kills, sorted(doubled)
    if chat == "same":
        assert all(not q["history_problems"] for q in requests if q["api"] == api)


@pytest.mark.integration
@pytest.mark.parametrize("kind", ALL)
def test_api_key_never_leaks(kind, tmp_path, sources):
    key = KINDS[kind]["key"]
    env = dict(os.environ, **{KINDS[kind]["env"]: key})
    out = tmp_path / "run"
    with ImageAPIStandIn(pending_polls=0) as server:
        server.script([{"status": 429, "retry_after": "0"}, {"status": 400, "echo_key": True}, {"status": 503}])
        server.rules.append((lambda q: q.get("height") == 40, {"safety": True}))
        cmd = cli_cmd(kind, getattr(server, KINDS[kind]["url"]), sources, out, 2, "--safety-retries", "1",
                      "--max-cost", "5", "--concurrency", "1")
        first = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=120, check=False)
        server.rules.clear()
        server.script([{"status": 401, "echo_key": True}])
        second = subprocess.run(cmd + ["--retry-stopped"], cwd=REPO, env=env, capture_output=True, timeout=120,
                                check=False)
        assert key in server.keys_seen
    assert first.returncode == 1 and "[REDACTED]" in first.stderr.decode(), first.stderr.decode()
    assert second.returncode == 2 and "HTTP 401" in second.stderr.decode()
    blobs = [first.stdout, first.stderr, second.stdout, second.stderr]
    blobs += [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    assert (out / STOPPED_FILE).is_file() and (out / CALLS_FILE).is_file() and (out / MANIFEST_NAME).is_file()
    for blob in blobs:
        assert key.encode() not in blob
    ed = make_editor(kind, base_url="http://127.0.0.1:9", api_key=key, max_attempts=1)
    assert key not in repr(ed)


def test_gemini_dry_run_needs_neither_the_extra_nor_the_key(monkeypatch, sources, tmp_path, capsys):
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, "google.genai", None)  # the gemini extra is not installed
    out = tmp_path / "run"
    code = cli_main(["generate", "--editor", "gemini", "--sources", str(sources), "--steps", "10", "--out", str(out),
                     "--chat", "different,same", "--dry-run"])
    assert code == 0 and "estimated cost: $0.1392 a step" in capsys.readouterr().out and not out.exists()
    with pytest.raises(MissingExtraError, match="gemini"):
        generate_chains(make_editor("gemini"), sources, "replicate", 1, 1, out, progress=False)
    assert not out.exists()


@pytest.mark.parametrize("kind", ALL)
def test_a_refused_connection_is_retried_and_costs_nothing(kind, tmp_path):
    from banana100.chains.budget import CallMeter
    from banana100.chains.editors.base import EditRequest
    from banana100.errors import EditError

    import numpy as np

    meter = CallMeter(tmp_path / CALLS_FILE)
    ed = make_editor(kind, base_url="http://127.0.0.1:9", max_attempts=2, sleep=Sleeps())  # nothing listens there
    with pytest.raises(EditError, match=r'failed after 2 calls \(faults: \{"connect_error": 2\}\)'):
        ed.edit(EditRequest(image=np.zeros((8, 8, 3), np.uint8), prompt="x", seed=1, meter=meter))
    meter.close()
    assert ledger_totals(tmp_path / CALLS_FILE) == {"spent_usd": 0.0, "calls": 2, "unfinished": 0}
