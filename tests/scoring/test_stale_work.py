"""Issue 32 items 1-4, "work redone or results stale": an emptied manifest, altered same-chat turn
files, an import spliced onto another import's chain, plain images scored by path only. Each test
fails on the code before the issue."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

import banana100.scoring as scoring
from banana100.chains.editors.gemini import GeminiEditor
from banana100.chains.manifest import MANIFEST_NAME, read_manifest
from banana100.chains.runner import generate_chains
from banana100.cli import main
from banana100.errors import ImportChainsError, ManifestError
from banana100.testing.gemini_standin import StandIn

KEY = "AIzaSy-TEST-ONLY-KEY-stale-0123456789"
PRO = "gemini-3-pro-image-preview"
SAME = "alpha__replicate__same-chat__r0"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    for name in ("GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)
    with StandIn() as s:
        yield s


def _run(server, sources, out, steps=2, **kw):
    editor = GeminiEditor(PRO, base_url=server.base_url, sleep=lambda s: None, backoff_s=1.0, timeout_s=5.0)
    return generate_chains(editor, sources, "replicate", steps, 1, out, progress=False, **kw)


def _images(out: Path) -> dict:
    return {p: p.read_bytes() for p in out.rglob("step_*.png")}


def _one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"banana100 {command}: error: "), err
    return err[0]


# ------------------------------------------------------------------ 1. images that the manifest does not list

def test_an_emptied_manifest_is_refused_and_no_request_is_sent(server, sources, tmp_path, capsys):
    out = tmp_path / "run"
    _run(server, sources, out, steps=2)
    n, images = len(server.requests), _images(out)
    assert n == 4
    (out / MANIFEST_NAME).write_bytes(b"")  # emptied (a 0-byte manifest beside run.json and the images)
    cmd = ["generate", "--editor", "gemini", "--base-url", server.base_url, "--sources", str(sources),
           "--steps", "2", "--out", str(out)]
    assert main(cmd) == 1
    line = _one_line_error(capsys, "generate")
    assert "4 images" in line and "alpha__replicate__r0/step_001.png" in line and str(out / MANIFEST_NAME) in line
    assert "backup" in line and "move" in line and "--out" in line
    assert len(server.requests) == n and _images(out) == images  # nothing sent, nothing rewritten
    assert (out / MANIFEST_NAME).read_bytes() == b""
    # the dry run says so too, before anything is planned
    with pytest.raises(ManifestError, match=r"are not in .*manifest.jsonl, which was emptied"):
        _run(server, sources, out, steps=2, dry_run=True)


def test_a_manifest_cut_short_is_refused_and_a_crash_is_still_adopted(server, sources, tmp_path):
    out = tmp_path / "run"
    _run(server, sources, out, steps=2)
    lines = (out / MANIFEST_NAME).read_text().splitlines(keepends=True)
    kept = [x for x in lines if json.loads(x)["step"] < 2]  # the last step of each chain dropped
    (out / MANIFEST_NAME).write_text("".join(kept))
    n = len(server.requests)
    with pytest.raises(ManifestError, match=r"2 images .*alpha__replicate__r0/step_002.png"):
        _run(server, sources, out, steps=3)
    assert len(server.requests) == n
    # a step whose image and side record reached the disk (a crash before its manifest line) is
    # adopted, as before: the side record says the image is complete
    for cid in ("alpha__replicate__r0", "beta__replicate__r0"):
        record = next(json.loads(x) for x in lines if json.loads(x)["chain_id"] == cid and json.loads(x)["step"] == 2)
        (out / cid / ".step_002.record.json").write_text(json.dumps(record))
    assert _run(server, sources, out, steps=3).written == 4  # two adopted, two made
    assert len(server.requests) == n + 2


# ------------------------------------------------------------------ 2. same-chat turn files

def _edit_text(body):
    next(p for p in body["parts"] if "text" in p)["text"] += " (edited)"


def _swap_signature(body):
    part = next(p for p in body["parts"] if "thought_signature_b64" in p)
    part["thought_signature_b64"] = base64.b64encode(b"another signature").decode()


def _drop_thoughts(body):
    body["parts"] = [p for p in body["parts"] if not p.get("thought")]


def _drop_draft(body):
    body["parts"] = [p for p in body["parts"] if "data_b64" not in p.get("inline_data", {})]


def _append_part(body):
    body["parts"].append({"text": "and one more thing"})


@pytest.mark.parametrize("change", [_edit_text, _swap_signature, _drop_thoughts, _drop_draft, _append_part])
def test_an_altered_turn_file_is_one_error_naming_it_and_nothing_is_sent(server, sources, tmp_path, change):
    out = tmp_path / "run"
    _run(server, [sources / "alpha.png"], out, steps=2, chat="same")
    records = {r["step"]: r for r in read_manifest(out)}
    assert all(len(records[k]["turn_sha256"]) == 64 for k in (1, 2))
    turn = out / SAME / "step_001.turn.json"
    body = json.loads(turn.read_text())
    change(body)
    turn.write_text(json.dumps(body))
    n = len(server.requests)
    with pytest.raises(ManifestError) as info:
        _run(server, [sources / "alpha.png"], out, steps=3, chat="same")
    assert str(turn) in str(info.value) and "\n" not in str(info.value)
    assert len(server.requests) == n


def test_turn_files_of_an_older_run_are_sent_with_a_warning(server, sources, tmp_path, caplog):
    """Records written before turn_sha256 existed: the turns are replayed unchecked, and a warning says so."""
    out = tmp_path / "run"
    _run(server, [sources / "alpha.png"], out, steps=2, chat="same")
    records = [{k: v for k, v in r.items() if k != "turn_sha256"} for r in read_manifest(out)]
    (out / MANIFEST_NAME).write_text("".join(json.dumps(r) + "\n" for r in records))
    with caplog.at_level("WARNING", logger="banana100"):
        assert _run(server, [sources / "alpha.png"], out, steps=3, chat="same").written == 1
    assert any(SAME in m and "turn_sha256" in m and "unchecked" in m for m in caplog.messages), caplog.messages
    assert all(r["history_problems"] == [] for r in server.requests)


# ------------------------------------------------------------------ 3. import-chains onto another import's chain

def _release(folder: Path, steps, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for step in steps:
        p = folder / "moss" / f"step_{step:03d}.png"
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(p)


def test_import_chains_refuses_new_steps_from_another_folder_onto_an_existing_chain(tmp_path, capsys):
    from banana100.chains.importer import import_chains

    pattern = "{chain}/step_{step:03d}.png"
    _release(tmp_path / "a", range(10), seed=1)
    _release(tmp_path / "b", (10, 11), seed=2)  # only the later steps of the same chain name
    import_chains(tmp_path / "a", pattern, tmp_path / "run")
    before = (tmp_path / "run" / MANIFEST_NAME).read_bytes()
    assert main(["import-chains", str(tmp_path / "b"), "--pattern", pattern, "--out", str(tmp_path / "run")]) == 1
    line = _one_line_error(capsys, "import-chains")
    assert "moss__replicate__r0" in line and str(tmp_path / "run") in line and "another --out" in line
    assert "steps 0-9" in line
    assert (tmp_path / "run" / MANIFEST_NAME).read_bytes() == before
    assert not (tmp_path / "run" / "moss__replicate__r0" / "step_010.png").exists()
    # the same folder, grown by two steps, continues its own chain
    _release(tmp_path / "a2", range(12), seed=1)
    os.rename(tmp_path / "a", tmp_path / "a-old")
    os.rename(tmp_path / "a2", tmp_path / "a")
    assert import_chains(tmp_path / "a", pattern, tmp_path / "run").imported == 2
    # a new chain from another folder beside the existing ones is fine
    _release(tmp_path / "c", range(3), seed=3)
    os.rename(tmp_path / "c" / "moss", tmp_path / "c" / "dunes")
    assert import_chains(tmp_path / "c", pattern, tmp_path / "run").imported == 3
    with pytest.raises(ImportChainsError, match="dunes__replicate__r0"):
        _release(tmp_path / "d", (3,), seed=4)
        os.rename(tmp_path / "d" / "moss", tmp_path / "d" / "dunes")
        import_chains(tmp_path / "d", pattern, tmp_path / "run")


# ------------------------------------------------------------------ 4. plain images: keyed by path and bytes

def _picture(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    base = np.linspace(0, 200, 120)[None, :, None].repeat(100, 0).repeat(3, 2)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.clip(base + rng.normal(0, 4 + seed, base.shape), 0, 255).astype(np.uint8)).save(path)
    return path


def _score_plain(source, out):
    return scoring.score_to_parquet(source, ["piqe"], out, device="cpu", progress=False)


def _rows(out) -> dict:
    rows = pq.read_table(out).to_pylist()
    by_image = {r["image"]: r for r in rows}
    assert len(by_image) == len(rows), [r["image"] for r in rows]  # one row per image (one metric)
    return by_image


@pytest.fixture
def scored(monkeypatch):
    """The images each score_chunk call scores, by name."""
    real, seen = scoring.score_chunk, []

    def spy(chunk, scorers, *uploads):
        seen.extend(d.name for d in chunk)
        return real(chunk, scorers, *uploads)

    monkeypatch.setattr(scoring, "score_chunk", spy)
    return seen


def test_one_plain_image_named_three_ways_is_one_row_with_one_path(tmp_path, monkeypatch, scored):
    monkeypatch.chdir(tmp_path)
    a = _picture(tmp_path / "g" / "a.png", 1)
    out = _score_plain(["g/a.png", "./g/a.png", "g/../g/a.png"], tmp_path / "s.parquet")
    assert list(_rows(out)) == [str(a)]  # canonical: absolute, whatever the form and the folder it was named from
    assert len(scored) == 1
    monkeypatch.chdir(tmp_path / "g")
    _score_plain(["./a.png"], out)
    _score_plain([str(tmp_path / "g" / ".." / "g" / "a.png")], out)
    assert list(_rows(out)) == [str(a)] and len(scored) == 1  # nothing scored again


def test_a_changed_plain_image_is_scored_again_and_its_old_row_dropped(tmp_path, scored):
    from banana100.fileio import sha256_file
    from banana100.metrics.engine.scorer import MetricScorer

    a, b = _picture(tmp_path / "g" / "a.png", 1), _picture(tmp_path / "g" / "b.png", 2)
    out = _score_plain(tmp_path / "g", tmp_path / "s.parquet")
    old = _rows(out)
    _picture(a, 7)  # new bytes under the same name
    scored.clear()
    _score_plain(tmp_path / "g", out)
    assert scored == [str(a)]  # b is unchanged: not scored again
    rows = _rows(out)
    assert set(rows) == {str(a), str(b)} and rows[str(b)] == old[str(b)]
    assert rows[str(a)]["sha256"] == sha256_file(a) != old[str(a)]["sha256"]
    assert rows[str(a)]["score"] == pytest.approx(MetricScorer("piqe", device="cpu").score([str(a)])[0], rel=1e-12)


def test_rows_of_images_deleted_from_a_folder_scored_again_are_dropped(tmp_path, scored, capsys):
    images = [_picture(tmp_path / "g" / f"{n}.png", i) for i, n in enumerate("abc")]
    out = _score_plain(tmp_path / "g", tmp_path / "s.parquet")
    images[2].unlink()
    scored.clear()
    capsys.readouterr()
    assert main(["score", str(tmp_path / "g"), "--metrics", "piqe", "--device", "cpu", "--out", str(out)]) == 0
    assert set(_rows(out)) == {str(p) for p in images[:2]} and scored == []
    err = capsys.readouterr().err
    assert f"banana100 score: {out}: dropped 1 row(s) of 1 image(s) no longer on disk" in err, err


def test_scoring_a_subset_into_an_existing_file_keeps_the_other_rows(tmp_path, scored):
    images = [_picture(tmp_path / "g" / f"{n}.png", i) for i, n in enumerate("abc")]
    other = _picture(tmp_path / "h" / "x.png", 5)
    out = _score_plain(tmp_path / "g", tmp_path / "s.parquet")
    _score_plain([images[0]], out)  # one of them again, by name: nothing to do
    images[1].unlink()  # deleted, but not from a folder this run scores
    _score_plain([other], out)
    assert set(_rows(out)) == {str(p) for p in images} | {str(other)}
    _score_plain(tmp_path / "g", out)  # its folder scored again: now its row goes
    assert set(_rows(out)) == {str(images[0]), str(images[2]), str(other)}


def test_rows_of_an_older_file_with_relative_paths_are_recognised(tmp_path, monkeypatch, scored):
    """A file written before paths were made canonical (`g/a.png` as given): not scored again,
    and its paths become canonical at the next merge."""
    import pyarrow as pa

    monkeypatch.chdir(tmp_path)
    a = _picture(tmp_path / "g" / "a.png", 1)
    out = _score_plain(["g"], tmp_path / "s.parquet")
    table = pq.read_table(out).replace_schema_metadata({})
    table = table.set_column(table.schema.get_field_index("image"), "image", pa.array(["g/a.png"]))
    pq.write_table(table, out)
    scored.clear()
    _score_plain(["g"], out)
    assert scored == [] and list(_rows(out)) == [str(a)]
    # the doubled rows (`g/a.png` and `./g/a.png`) in such a file: read, and merged into one
    twice = pa.concat_tables([table, table.set_column(table.schema.get_field_index("image"), "image",
                                                      pa.array(["./g/a.png"]))])
    pq.write_table(twice, out)
    _score_plain(["g"], out)
    assert scored == [] and list(_rows(out)) == [str(a)]


def test_a_dataset_with_a_shard_copied_twice_is_refused_before_any_work(tmp_path, capsys):
    """Issue 44 item 10: a duplicated shard was scored in full, then score blamed its own part file, and the
    rerun failed the same way; verify found it. Now the shards' metadata is checked first, on one line."""
    from banana100.cli import main
    from banana100.dataset.build import build_dataset
    from fixtures.runs import make_run

    make_run(tmp_path / "run", sources=("moss",), settings=("replicate",), steps=5)
    ds = build_dataset([tmp_path / "run"], tmp_path / "ds")
    [shard] = (ds / "data").rglob("*.parquet")
    shutil.copy(shard, shard.with_name(shard.stem + " (copy).parquet"))
    out = tmp_path / "s.parquet"
    for _ in range(2):  # the rerun says the same, and still scores nothing
        assert main(["score", str(ds), "--metrics", "piqe", "--out", str(out), "--device", "cpu"]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"banana100 score: error: {ds}: 6 row(s) repeat a chain step, "
                                                   "e.g. chain 'moss__replicate__r0' step 0 appears twice (")
        assert "with the same image: a data file copied twice? Remove the copy" in err[0]
        assert not out.exists() and not out.with_name(out.name + ".parts").exists()
