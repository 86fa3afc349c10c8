"""The gemini editor: the real google-genai client against a local stand-in server, with faults.

Every test talks HTTP to `banana100/testing/gemini_standin.py` on 127.0.0.1; nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from banana100.chains.budget import CALLS_FILE, CallMeter, ledger_totals
from banana100.cli import main as cli_main
from banana100.chains.editors import make_editor
from banana100.chains.editors.base import EditRequest
from banana100.errors import BudgetExceeded, RunStopped
from banana100.chains.editors.gemini import FAST_MODEL, GeminiEditor, api_seed
from banana100.chains.editors.simulated import SimulatedEditor
from banana100.imageio import load_rgb
from banana100.chains.manifest import read_manifest
from banana100.chains.pricing import price_for
from banana100.chains.runner import generate_chains
from banana100.chains.step import step_seed
from banana100.chains.store import STOPPED_FILE, read_stopped
from banana100.errors import Banana100Error, ChainsFailedError, ManifestError
from banana100.schema import FIELD_NAMES
from banana100.chains.settings import load_settings
from banana100.testing.runfolder import write_source

from banana100.testing.gemini_standin import StandIn

from fixtures.repopaths import REPO
from fixtures.runs import check_chains
from kill_harness import kill_after, on_disk
KEY = "AIzaSy-TEST-ONLY-KEY-b4n4n4-0123456789"
PRO = "gemini-3-pro-image-preview"


class Sleeps(list):
    """Records the waits the editor asks for, without waiting."""

    def __call__(self, seconds):
        self.append(seconds)


@pytest.fixture(autouse=True)
def api_env(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    for name in ("GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    with StandIn() as s:
        yield s


def editor(server, **kw) -> GeminiEditor:
    kw.setdefault("sleep", Sleeps())
    kw.setdefault("backoff_s", 1.0)
    kw.setdefault("timeout_s", 5.0)
    return GeminiEditor(kw.pop("model", PRO), base_url=server.base_url, **kw)


def run(ed, sources, out, steps=2, repeats=1, setting="replicate", **kw):
    return generate_chains(ed, sources, setting, steps, repeats, out, progress=False, **kw)


def records_of(out, cid):
    return sorted((r for r in read_manifest(out) if r["chain_id"] == cid), key=lambda r: r["step"])


def seed_of(cid, step, retry=0, base=0):
    return api_seed(step_seed(base, cid, step), retry)


# -- the happy path --------------------------------------------------------------------------


def test_records_what_the_service_returns(server, sources, tmp_path):
    out = tmp_path / "run"
    summary = run(editor(server), sources, out, steps=3, concurrency=2)
    assert (summary.written, summary.chains_complete) == (8, 2)
    chains = check_chains(out, 2, 3)
    assert server.keys_seen == {KEY}  # the SDK sent the key from GEMINI_API_KEY
    by_seed = {q["seed"]: q for q in server.requests}
    price = price_for(PRO)
    for cid, recs in chains.items():
        for r in recs[1:]:
            assert set(r) <= set(FIELD_NAMES)
            assert (r["editor"], r["model"]) == ("gemini", PRO)
            assert r["prompt"] == "Produce an exact replica of the provided image, with no alterations."
            assert r["seed"] == seed_of(cid, r["step"])
            sent = json.loads(r["generation_config"])
            assert sent == {
                "response_modalities": ["TEXT", "IMAGE"],
                "seed": r["seed"],
                "thinking_config": {"include_thoughts": True},
            }
            q = by_seed[r["seed"]]
            assert q["prompt"] == r["prompt"] and q["sha256"] == r["parent_sha256"]  # the stored bytes were sent
            assert q["config"]["seed"] == r["seed"] and q["config"]["thinkingConfig"] == {"includeThoughts": True}
            assert r["finish_reason"] == "STOP" and r["attempts"] == 1 and r["safety_blocks"] == 0
            assert "reproduce it exactly" in r["thought_summary"]
            assert (r["input_tokens"], r["output_tokens"], r["thought_tokens"]) == (580, 1130, 250)
            # 580 in at $2/M, 10 text + 250 thinking at $12/M, 1120 image at $120/M
            assert r["cost_usd"] == pytest.approx(price.cost(580, 260, 1120)) == pytest.approx(0.13868)
            assert isinstance(r["latency_s"], float)
            info = json.loads(r["editor_info"])
            assert info["thought_images"] == 1 and info["faults"] == {}
            # The final image, not the interim thought image (8x8 black), and the service's own bytes.
            assert (r["width"], r["height"]) == (q["width"], q["height"])
    assert summary.cost_usd == pytest.approx(6 * 0.13868)
    assert ledger_totals(out / CALLS_FILE) == {"spent_usd": pytest.approx(6 * 0.13868), "calls": 6, "unfinished": 0}
    assert "estimated cost: $0.83 this run" in str(summary)


def test_an_upload_cut_short_by_a_kill_never_reaches_the_service(server):
    """A client killed mid-upload sends fewer bytes than it announced: the stand-in, like the service, neither
    records nor answers it, even where what came would make a request of its own."""
    import base64
    import io
    import socket
    from urllib.parse import urlparse

    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (8, 8), "grey").save(png, "PNG")
    body = json.dumps({"contents": [{"role": "user", "parts": [
        {"text": "copy"}, {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(png.getvalue()).decode()}}]}]})
    url = urlparse(server.base_url)
    with socket.create_connection((url.hostname, url.port), timeout=5) as sock:
        sock.sendall(b"POST /v1beta/models/m:generateContent HTTP/1.1\r\nHost: x\r\nx-goog-api-key: k\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (len(body) + 100) + body.encode())
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(1024) == b""  # closed without an answer
    assert server.requests == []


def test_concurrency_puts_k_requests_in_flight(sources, tmp_path):
    for i in range(2, 4):
        write_source(sources / f"extra{i}.png", seed=i)
    with StandIn(latency_s=0.3) as server:
        run(editor(server), sources, tmp_path / "run", steps=2, concurrency=4)
    assert server.max_inflight == 4


def test_fast_model_and_sdk_base_url_env(sources, tmp_path, monkeypatch, server):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)  # the SDK's own variable
    ed = GeminiEditor(FAST_MODEL, sleep=Sleeps())
    summary = run(ed, sources, tmp_path / "run", steps=1)
    assert {q["model"] for q in server.requests} == {FAST_MODEL}
    r = [r for r in read_manifest(tmp_path / "run") if r["step"] == 1][0]
    assert r["model"] == FAST_MODEL
    assert r["cost_usd"] == pytest.approx(price_for(FAST_MODEL).cost(580, 260, 1120))
    assert summary.chains_complete == 2


# -- faults ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault, expected",
    [({"status": 429, "retry_after": "7"}, 7.0), ({"status": 429, "retry_delay": "3s"}, 3.0)],
)
def test_429_honours_retry_after(server, sources, tmp_path, fault, expected):
    server.script([fault, dict(fault)])
    sleeps = Sleeps()
    run(editor(server, sleep=sleeps, backoff_s=0.5), [sources / "alpha.png"], tmp_path / "run", steps=1)
    assert len(sleeps) == 2 and all(expected <= s <= expected + 0.5 for s in sleeps)
    r = records_of(tmp_path / "run", "alpha__replicate__r0")[1]
    assert r["attempts"] == 3 and json.loads(r["editor_info"])["faults"] == {"http_429": 2}
    assert r["seed"] == seed_of("alpha__replicate__r0", 1)  # a transport retry keeps the seed
    assert r["cost_usd"] == pytest.approx(0.13868)  # a 429 costs nothing


def test_5xx_and_timeouts_back_off_exponentially(server, sources, tmp_path):
    server.script([{"status": 500}, {"status": 503}, {"delay": 3.0}, {"status": 502}])
    sleeps = Sleeps()
    out = tmp_path / "run"
    run(editor(server, sleep=sleeps, backoff_s=1.0, timeout_s=1.5), [sources / "alpha.png"], out, steps=1)
    assert len(sleeps) == 4
    for n, s in enumerate(sleeps):  # equal jitter: between half and all of 1, 2, 4, 8 s
        assert 2**n / 2 <= s <= 2**n
    r = records_of(out, "alpha__replicate__r0")[1]
    assert r["attempts"] == 5
    assert json.loads(r["editor_info"])["faults"] == {"http_500": 1, "http_503": 1, "timeout": 1, "http_502": 1}
    # A timed-out call may have been billed: it is charged at its reservation.
    reserve = price_for(PRO).reserve_call()
    assert r["cost_usd"] == pytest.approx(0.13868 + reserve)
    ends = [json.loads(x) for x in (out / CALLS_FILE).read_text().splitlines() if '"end"' in x]
    assert [e["outcome"] for e in ends] == ["http_500", "http_503", "timeout", "http_502", "ok"]
    assert [e["cost_known"] for e in ends] == [True, True, False, True, True]


def test_bad_answers_are_rejected_and_never_written(server, sources, tmp_path):
    server.script([{"no_image": True}, {"truncated": True}, {"bad_base64": True}, {"finish_reason": "NO_IMAGE"}])
    out = tmp_path / "run"
    run(editor(server), [sources / "alpha.png"], out, steps=2)
    check_chains(out, 1, 2)
    cid = "alpha__replicate__r0"
    r = records_of(out, cid)[1]
    assert r["attempts"] == 5
    assert json.loads(r["editor_info"])["faults"] == {"no_image": 2, "bad_image": 1, "bad_response": 1}
    # Content faults draw a new seed; the record holds the seed that made the image.
    seeds = [q["seed"] for q in server.requests[:5]]
    assert seeds[0] == seed_of(cid, 1) and seeds[1] == seed_of(cid, 1, 1) and seeds[4] == r["seed"]
    assert r["seed"] == seed_of(cid, 1, 3)
    assert len(list((out / cid).glob("*.png"))) == 3  # steps 0-2, nothing else


def test_retries_are_bounded_and_other_chains_carry_on(server, sources, tmp_path):
    server.rules.append((lambda q: q["height"] == 40, {"status": 503}))  # beta always fails
    out = tmp_path / "run"
    with pytest.raises(ChainsFailedError, match=r"beta__replicate__r0 at step 1.*after 3 calls") as info:
        run(editor(server, max_attempts=3), sources, out, steps=2)
    assert info.value.summary.chains_complete == 1
    assert sum(1 for q in server.requests if q["height"] == 40) == 3
    ends = [json.loads(x) for x in (out / CALLS_FILE).read_text().splitlines() if '"end"' in x]
    assert sum(1 for e in ends if e["outcome"] == "http_503") == 3
    server.rules.clear()
    assert run(editor(server), sources, out, steps=2).written == 2  # a rerun finishes it
    check_chains(out, 2, 2)


def test_safety_block_retries_with_new_seeds(server, sources, tmp_path):
    server.script([{"block_reason": "SAFETY"}, {"finish_reason": "IMAGE_SAFETY"}])
    out = tmp_path / "run"
    run(editor(server), [sources / "alpha.png"], out, steps=1)
    cid = "alpha__replicate__r0"
    r = records_of(out, cid)[1]
    assert (r["safety_blocks"], r["attempts"]) == (2, 3)
    assert [q["seed"] for q in server.requests] == [seed_of(cid, 1, n) for n in range(3)]
    assert r["seed"] == seed_of(cid, 1, 2) and json.loads(r["generation_config"])["seed"] == r["seed"]
    assert json.loads(r["editor_info"])["faults"] == {"safety": 2}


def test_repeated_safety_blocks_stop_the_chain_only(server, sources, tmp_path):
    server.rules.append((lambda q: q["height"] == 40, {"finish_reason": "IMAGE_SAFETY"}))
    out = tmp_path / "run"
    summary = run(editor(server, safety_retries=2), sources, out, steps=2)
    assert (summary.chains_complete, summary.chains_stopped) == (1, 1)
    assert "chains stopped by the editor: 1" in str(summary)
    beta = [q for q in server.requests if q["height"] == 40]
    assert len(beta) == 3 and len({q["seed"] for q in beta}) == 3
    stopped = read_stopped(out)
    entry = stopped["beta__replicate__r0"]
    assert entry["step"] == 1 and "blocked for safety 3 times" in entry["reason"]
    assert entry["details"]["reason"] == "safety" and entry["details"]["last_reason"] == "IMAGE_SAFETY"
    assert [r["step"] for r in records_of(out, "beta__replicate__r0")] == [0]
    # A rerun does not spend money on the stopped chain ...
    n = len(server.requests)
    again = run(editor(server, safety_retries=2), sources, out, steps=2)
    assert len(server.requests) == n and again.chains_stopped == 1
    # ... unless asked to.
    server.rules.clear()
    done = run(editor(server), sources, out, steps=2, retry_stopped=True)
    assert (done.written, done.chains_stopped) == (2, 0) and read_stopped(out) == {}
    check_chains(out, 2, 2)


def test_bad_key_stops_the_run(server, sources, tmp_path):
    server.script([{"status": 401}])
    with pytest.raises(RunStopped, match="HTTP 401.*no chain can go on"):
        run(editor(server), [sources / "alpha.png"], tmp_path / "run", steps=3)
    assert len(server.requests) == 1


def test_missing_key_fails_before_anything_is_written(monkeypatch, sources, tmp_path, server):
    monkeypatch.delenv("GEMINI_API_KEY")
    with pytest.raises(RunStopped, match="GEMINI_API_KEY"):
        run(editor(server), sources, tmp_path / "run")
    assert not (tmp_path / "run").exists() and not server.requests


# -- money -----------------------------------------------------------------------------------


def test_cost_cap_stops_cleanly(server, sources, tmp_path, capsys):
    out = tmp_path / "run"
    reserve = price_for(PRO).reserve_call()
    cap = 0.5
    with pytest.raises(BudgetExceeded, match=r"cost cap reached") as info:
        run(editor(server), [sources / "alpha.png"], out, steps=10, max_cost=cap)
    written = len(read_manifest(out)) - 1
    spent = ledger_totals(out / CALLS_FILE)["spent_usd"]
    assert written == len(server.requests) == 3  # 3 x 0.139 + one more reservation > 0.5
    assert spent <= cap and spent + reserve > cap
    assert info.value.summary.cost_usd == pytest.approx(spent)
    assert [r["step"] for r in records_of(out, "alpha__replicate__r0")] == [0, 1, 2, 3]
    # The cap covers the folder: the same command makes no call; a higher cap goes on.
    argv = [
        "generate", "--editor", "gemini", "--base-url", server.base_url, "--sources", str(tmp_path / "one"),
        "--steps", "10", "--out", str(out), "--max-cost", str(cap),
    ]
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "alpha.png").write_bytes((sources / "alpha.png").read_bytes())
    assert cli_main(argv) == 3
    assert "cost cap reached" in capsys.readouterr().err and len(server.requests) == 3
    assert cli_main(argv[:-1] + ["1.0"]) == 3
    assert len(read_manifest(out)) - 1 == 7 and ledger_totals(out / CALLS_FILE)["spent_usd"] <= 1.0


def test_meter_rate_limit_and_unfinished_calls(tmp_path):
    sleeps = Sleeps()
    meter = CallMeter(tmp_path / CALLS_FILE, rpm=120, sleep=sleeps)
    tickets = [meter.start(0.1, chain_id="c", step=k) for k in range(3)]
    assert len(sleeps) == 2 and sleeps[0] == pytest.approx(0.5, abs=0.05) and sleeps[1] == pytest.approx(1.0, abs=0.05)
    meter.end(tickets[0], 0.02, "ok")
    meter.end(tickets[1], None, "timeout")  # unknown: charged at its reservation
    meter.close()
    # tickets[2] never ended (the process died mid-call): counted at its reservation.
    assert ledger_totals(tmp_path / CALLS_FILE) == {"spent_usd": pytest.approx(0.22), "calls": 3, "unfinished": 1}
    capped = CallMeter(tmp_path / CALLS_FILE, max_cost=0.3)
    assert capped.spent == pytest.approx(0.22)
    with pytest.raises(BudgetExceeded):
        capped.start(0.1)
    capped.start(0.08)


def test_dry_run_calls_and_writes_nothing(server, sources, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY")  # not needed for a dry run
    out = tmp_path / "run"
    argv = [
        "generate", "--editor", "gemini", "--base-url", server.base_url, "--sources", str(sources),
        "--setting", "color_roundtrip", "--steps", "100", "--repeats", "5", "--out", str(out), "--dry-run",
        "--max-cost", "20",
    ]
    assert cli_main(argv) == 0
    text = capsys.readouterr().out
    assert "dry run" in text and "steps to make: 1000" in text and "chains: 10" in text
    # 590 tokens in at $2/M, 300 thinking at $12/M, 1120 image tokens at $120/M = $0.13918
    assert "$0.1392 a step" in text and "$139.18 for this run" in text and "$13.92 per 100 steps" in text
    assert "--max-cost $20.00 will stop the run after about 143 steps" in text
    assert "step 1: 'Convert the provided image to black and white" in text
    assert "step 2: 'Restore the natural colours" in text and '"seed":' in text
    assert not out.exists() and not server.requests


def test_cli_options_default_to_the_editors_defaults():
    """`banana100 generate` takes the service editors' defaults from their shared base (one home)."""
    import inspect

    from banana100.chains.editors.service import ServiceEditor
    from banana100.cli import build_parser

    args = build_parser().parse_args(["generate", "--sources", ".", "--out", "o"])
    params = inspect.signature(ServiceEditor).parameters
    assert (args.timeout, args.max_attempts, args.safety_retries) == tuple(
        params[k].default for k in ("timeout_s", "max_attempts", "safety_retries"))
    assert args.model is None and inspect.signature(GeminiEditor).parameters["model"].default == PRO
    assert GeminiEditor().model == PRO  # no --model: the editor's default


# -- settings --------------------------------------------------------------------------------


def test_every_setting_prompt_schedule(server, tmp_path):
    settings = load_settings()
    expected = {
        "replicate", "reworded", "mirror", "rotate", "color_roundtrip", "add_apple", "add_fruits",
        "replicate_seed_fixed", "replicate_temp0", "replicate_temp2", "replicate_1k", "replicate_2k", "replicate_4k",
    }
    assert expected <= set(settings)
    replica = "Produce an exact replica of the provided image, with no alterations."
    assert settings["replicate"].prompts == (replica,)
    assert settings["reworded"].prompt(1) == replica and len(set(settings["reworded"].prompts)) == 5
    assert settings["reworded"].prompt(6) == replica and settings["reworded"].prompt(2) != replica
    cr = settings["color_roundtrip"]
    assert [("black and white" in cr.prompt(k)) for k in range(1, 7)] == [True, False] * 3
    assert [cr.simulate_for(k)["transform"] for k in (1, 2, 3)] == ["desaturate", "recolor", "desaturate"]
    fruits = settings["add_fruits"]
    assert len(set(fruits.prompt(k) for k in range(1, 101))) == 10 and fruits.prompt(11) == fruits.prompt(1)
    assert all("Add one" in fruits.prompt(k) for k in range(1, 101))
    assert settings["replicate_4k"].config == {"image_size": "4K"}
    assert settings["replicate_temp0"].config == {"temperature": 0.0}

    src = tmp_path / "src"
    src.mkdir()
    write_source(src / "s.png", h=24, w=32)
    steps = 3
    for name, s in settings.items():
        out = tmp_path / name
        start = len(server.requests)
        run(editor(server), src, out, steps=steps, setting=name)
        cid = f"s__{name}__r0"
        recs = records_of(out, cid)
        asked = server.requests[start:]
        assert [q["prompt"] for q in asked] == [s.prompt(k) for k in range(1, steps + 1)]
        for k, (r, q) in enumerate(zip(recs[1:], asked, strict=True), start=1):
            assert r["prompt"] == s.prompt(k)
            sent = json.loads(r["generation_config"])
            assert q["config"].get("temperature") == s.config.get("temperature") == sent.get("temperature")
            size = s.config.get("image_size")
            assert (q["config"].get("imageConfig") or {}).get("imageSize") == size
            assert (sent.get("image_config") or {}).get("image_size") == size
            fixed = s.config.get("seed_policy") == "fixed"
            assert r["seed"] == seed_of(cid, 1 if fixed else k) == q["seed"]
        # The simulated editor honours (or at least survives) every setting's hints.
        sim = tmp_path / f"sim_{name}"
        run(SimulatedEditor(), src, sim, steps=2, setting=name)
        assert len(read_manifest(sim)) == 3
    rot = load_rgb(tmp_path / "sim_rotate" / "s__rotate__r0" / "step_001.png")
    assert rot.shape[:2] == (32, 24)
    grey = load_rgb(tmp_path / "sim_color_roundtrip" / "s__color_roundtrip__r0" / "step_001.png").astype(int)
    assert np.abs(grey[..., 0] - grey[..., 1]).mean() < 3  # near grey (noise and JPEG add a little)


# -- crashes ---------------------------------------------------------------------------------


class Crash(BaseException):
    pass


def test_crash_between_image_and_manifest_repeats_no_call(server, sources, tmp_path, monkeypatch):
    """The image and its side record are on disk, the manifest line is not: the rerun adopts them."""
    from banana100.chains.manifest import ManifestWriter

    real = ManifestWriter.append
    state = {"crashed": False}

    def crashing(self, record):
        if record["step"] == 2 and not state["crashed"]:
            state["crashed"] = True
            raise Crash()
        return real(self, record)

    monkeypatch.setattr(ManifestWriter, "append", crashing)
    out = tmp_path / "run"
    with pytest.raises(ChainsFailedError):
        run(editor(server), [sources / "alpha.png"], out, steps=3)
    cid = "alpha__replicate__r0"
    assert (out / cid / "step_002.png").is_file() and (out / cid / ".step_002.record.json").is_file()
    assert [r["step"] for r in records_of(out, cid)] == [0, 1]
    pending = json.loads((out / cid / ".step_002.record.json").read_text())
    n = len(server.requests)
    assert run(editor(server), [sources / "alpha.png"], out, steps=3).written == 2
    assert [q["seed"] for q in server.requests[n:]] == [seed_of(cid, 3)]  # step 2 was not asked again
    check_chains(out, 1, 3)
    assert records_of(out, cid)[2] == pending


def cli_cmd(base_url, sources, out, steps, repeats):
    return [
        sys.executable, "-m", "banana100", "generate", "--editor", "gemini", "--base-url", base_url,
        "--sources", str(sources), "--steps", str(steps), "--repeats", str(repeats), "--out", str(out),
        "--concurrency", "3",
    ]


@pytest.mark.integration  # a runner process killed and resumed (~7 s)
def test_sigkill_and_resume_repeat_no_call(tmp_path):
    src = tmp_path / "sources"
    src.mkdir()
    write_source(src / "alpha.png", seed=1)
    steps, repeats = 14, 3
    out = tmp_path / "run"
    seeds = {seed_of(f"alpha__replicate__r{r}", k): (f"alpha__replicate__r{r}", k) for r in range(repeats) for k in range(1, steps + 1)}
    env = dict(os.environ, GEMINI_API_KEY=KEY)
    with StandIn(latency_s=0.04) as server:
        cmd = cli_cmd(server.base_url, src, out, steps, repeats)
        kill_after(cmd, env, out, (10, 25), tmp_path / "log.txt")  # kill twice, at different points
        before = on_disk(out)
        n = len(server.requests)
        assert len(before) < repeats * (steps + 1)
        rerun = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=120, check=False)
        assert rerun.returncode == 0, rerun.stderr.decode()
        asked = [seeds[q["seed"]] for q in server.requests[n:]]
    assert not set(asked) & before  # no call repeated for a step already on disk
    assert len(asked) == len(set(asked))
    assert set(asked) | before == {(c, k) for c, k in seeds.values()} | {(f"alpha__replicate__r{r}", 0) for r in range(repeats)}
    check_chains(out, repeats, steps)
    # The images are the stand-in's answers to the recorded seeds: nothing half-written.
    for r in read_manifest(out):
        if r["step"]:
            assert json.loads(r["generation_config"])["seed"] == r["seed"]


# -- the key ---------------------------------------------------------------------------------


@pytest.mark.integration  # a runner process killed and resumed (~7 s)
def test_api_key_never_leaks(tmp_path, sources):
    """Run through faults that echo the key; scan everything written and printed for it."""
    out = tmp_path / "run"
    env = dict(os.environ, GEMINI_API_KEY=KEY)
    with StandIn() as server:
        server.script(
            [{"status": 429, "retry_after": "0"}, {"status": 400, "echo_key": True}, {"status": 503}, {"no_image": True}]
        )
        server.rules.append((lambda q: q["height"] == 40, {"block_reason": "SAFETY"}))
        cmd = cli_cmd(server.base_url, sources, out, 2, 1) + ["--safety-retries", "1", "--max-cost", "5", "--concurrency", "1"]
        first = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=120, check=False)
        server.rules.clear()
        server.script([{"status": 401, "echo_key": True}])
        second = subprocess.run(
            cmd + ["--retry-stopped"], cwd=REPO, env=env, capture_output=True, timeout=120, check=False
        )
        assert KEY in server.keys_seen
    # the 400 (echoing the key) failed one chain: exit 1, as any chain that failed
    assert first.returncode == 1 and "[REDACTED]" in first.stderr.decode(), first.stderr.decode()
    assert second.returncode == 2 and "HTTP 401" in second.stderr.decode()
    texts = [first.stdout, first.stderr, second.stdout, second.stderr]
    texts += [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    assert (out / STOPPED_FILE).is_file() and (out / CALLS_FILE).is_file()
    for blob in texts:
        assert KEY.encode() not in blob
    ed = make_editor("gemini", base_url="http://127.0.0.1:9", api_key=KEY, max_attempts=1)
    assert KEY not in repr(ed)
    with pytest.raises(Exception) as info:
        ed.edit(EditRequest(image=np.zeros((4, 4, 3), np.uint8), prompt="x", seed=1))
    assert KEY not in str(info.value) and KEY not in repr(info.value)


# -- same-chat mode ----------------------------------------------------------------------------


def same_chat_requests(server, cid_seeds):
    return [q for q in server.requests if q["seed"] in cid_seeds]


def test_same_chat_sends_the_conversation_with_the_models_own_parts(server, sources, tmp_path):
    out = tmp_path / "run"
    summary = run(editor(server), [sources / "alpha.png"], out, steps=3, chat="different,same")
    assert summary.chains == 2
    same, diff = "alpha__replicate__same-chat__r0", "alpha__replicate__r0"
    by_seed = {seed_of(same, k): k for k in (1, 2, 3)}
    asked = [q for q in server.requests if q["seed"] in by_seed]
    # turn k: the user's k turns and the model's k-1 answers; every earlier answer sent back whole
    assert [(by_seed[q["seed"]], q["turns"], q["images_in"]) for q in asked] == [(1, 1, 1), (2, 3, 3), (3, 5, 5)]
    assert all(q["history_problems"] == [] for q in asked)
    # each same-chat step edits the model's previous answer, as stored
    recs = records_of(out, same)
    assert [q["sha256"] for q in asked[1:]] == [r["sha256"] for r in recs[1:3]]
    assert {r.get("chat_mode") for r in recs} == {"same"}
    assert {r.get("chat_mode") for r in records_of(out, diff)} == {"different"}
    assert [q["turns"] for q in server.requests if q["seed"] in {seed_of(diff, k) for k in (1, 2, 3)}] == [1, 1, 1]
    # the input tokens grow with the history, and so does the recorded cost
    tokens = [r["input_tokens"] for r in recs[1:]]
    costs = [r["cost_usd"] for r in recs[1:]]
    assert tokens[0] < tokens[1] < tokens[2] and costs[0] < costs[1] < costs[2]
    assert sorted(p.name for p in (out / same).glob("*.turn.json")) == [f"step_00{k}.turn.json" for k in (1, 2, 3)]
    assert not list((out / diff).glob("*.turn.json"))
    check_chains(out, 2, 3)


def test_same_chat_resumes_from_the_stored_turns(server, sources, tmp_path):
    """A chain made in two runs sends what a chain made in one run sends."""
    one, two = tmp_path / "one", tmp_path / "two"
    run(editor(server), [sources / "alpha.png"], one, steps=4, chat="same")
    full = [(q["seed"], q["turns"], q["images_in"], q["sha256"]) for q in server.requests]
    server.requests.clear()
    run(editor(server), [sources / "alpha.png"], two, steps=2, chat="same")
    run(editor(server), [sources / "alpha.png"], two, steps=4, chat="same")
    resumed = [(q["seed"], q["turns"], q["images_in"], q["sha256"]) for q in server.requests]
    assert resumed == full  # nothing asked twice, the same history each step
    assert all(q["history_problems"] == [] for q in server.requests)
    cid = "alpha__replicate__same-chat__r0"
    assert [r["sha256"] for r in records_of(one, cid)] == [r["sha256"] for r in records_of(two, cid)]


@pytest.mark.integration  # a runner process killed and resumed (~7 s)
def test_same_chat_sigkill_and_resume_repeat_no_call_and_keep_the_conversation(tmp_path):
    src = tmp_path / "sources"
    src.mkdir()
    write_source(src / "alpha.png", seed=1)
    steps, repeats = 8, 2
    out = tmp_path / "run"
    cids = [f"alpha__replicate__same-chat__r{r}" for r in range(repeats)]
    seeds = {seed_of(c, k): (c, k) for c in cids for k in range(1, steps + 1)}
    env = dict(os.environ, GEMINI_API_KEY=KEY)
    with StandIn(latency_s=0.04) as server:
        cmd = cli_cmd(server.base_url, src, out, steps, repeats) + ["--chat", "same"]
        kill_after(cmd, env, out, (5, 11), tmp_path / "log.txt")
        before = on_disk(out)
        n = len(server.requests)
        assert len(before) < repeats * (steps + 1)
        rerun = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=120, check=False)
        assert rerun.returncode == 0, rerun.stderr.decode()
        asked = [seeds[q["seed"]] for q in server.requests[n:]]
        requests = list(server.requests)
    assert not set(asked) & before and len(asked) == len(set(asked))  # nothing on disk asked again
    # every request of every run (killed or not) carried the chain's whole conversation, intact:
    # the source, then each earlier answer whole (the stand-in's: an interim thought image and the final)
    for q in requests:
        cid, k = seeds[q["seed"]]
        assert (q["turns"], q["images_in"], q["history_problems"]) == (2 * k - 1, 2 * k - 1, []), (cid, k)
    check_chains(out, repeats, steps)
    for cid in cids:
        recs = records_of(out, cid)
        assert {r["chat_mode"] for r in recs} == {"same"} and len(recs) == steps + 1
        assert sorted(p.name for p in (out / cid).glob("*.turn.json")) == [f"step_{k:03d}.turn.json"
                                                                          for k in range(1, steps + 1)]


def test_same_chat_missing_turn_file_is_one_clear_error(server, sources, tmp_path):
    out = tmp_path / "run"
    run(editor(server), [sources / "alpha.png"], out, steps=2, chat="same")
    turn = out / "alpha__replicate__same-chat__r0" / "step_002.turn.json"
    turn.unlink()
    n = len(server.requests)
    with pytest.raises(ManifestError, match="step_002.turn.json: missing"):  # one line, before any request
        run(editor(server), [sources / "alpha.png"], out, steps=3, chat="same")
    assert len(server.requests) == n  # nothing was asked without the conversation


def test_same_chat_cost_grows_and_the_cap_holds(server, sources, tmp_path):
    out = tmp_path / "run"
    ed = editor(server)
    text = run(ed, [sources / "alpha.png"], out, steps=10, chat="same", dry_run=True)
    assert "chat: same" in text and "costs at least $0.0012 more than the one before" in text
    diff = run(ed, [sources / "alpha.png"], out, steps=10, dry_run=True)
    cost = lambda t: float(t.split(" for this run")[0].rsplit("$", 1)[1])  # noqa: E731
    assert cost(text) > cost(diff)
    # a cap between 3 and 4 same-chat steps: the run stops before the call that would pass it
    cap = 3 * ed.estimate_usd({}, 2)[1]
    with pytest.raises(BudgetExceeded):
        run(ed, [sources / "alpha.png"], out, steps=10, chat="same", max_cost=cap)
    spent = ledger_totals(out / CALLS_FILE)["spent_usd"]
    assert spent <= cap
    assert 1 <= len(records_of(out, "alpha__replicate__same-chat__r0")) - 1 < 10


def test_same_chat_needs_an_editor_that_holds_a_conversation(sources, tmp_path):
    from banana100.chains.editors import make_editor

    with pytest.raises(Banana100Error, match="--chat same: the simulated editor .* cannot hold a conversation"):
        run(make_editor("simulated"), sources, tmp_path / "run", chat="same")
    with pytest.raises(Banana100Error, match="--chat 'sometimes': expected different or same"):
        run(make_editor("simulated"), sources, tmp_path / "run", chat="sometimes")
    assert not (tmp_path / "run").exists()
