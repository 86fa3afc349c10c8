"""The dataset at scale: every config round-trips (also streamed), per-model configs, verify on
damaged copies, import-chains, push --dry-run, resumable and parallel builds, bounded memory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from banana100.dataset import checks as checks_mod
from banana100.dataset import shards
from banana100.dataset.build import build_dataset
from banana100.dataset.layout import ENDPOINT_STEPS, model_config
from banana100.errors import DatasetError
from banana100.chains.manifest import read_manifest, sha256_bytes
from banana100.dataset.verify import verify_dataset

from fixtures.runs import SIZE, make_run

GEMINI = "gemini-3-pro-image-preview"


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """Chains by two editor models: (dataset folder, records, cache dir)."""
    base = tmp_path_factory.mktemp("two_models")
    a = make_run(base / "sim", sources=("moss", "dunes"), steps=12, seed=1)
    b = make_run(base / "gem", sources=("peacock",), steps=12, seed=2, editor="gemini", model=GEMINI)
    out = build_dataset([base / "sim", base / "gem"], base / "ds", shard_max_bytes=64 * 1024)
    return out, a + b, base / "cache"


def _expected(records, config):
    if config == "default":
        return records
    if config == "endpoints":
        return [r for r in records if r["step"] in ENDPOINT_STEPS]
    if config.startswith("model-"):
        chains = {r["chain_id"] for r in records if r["step"] > 0 and model_config(r["model"]) == config}
        return [r for r in records if r["chain_id"] in chains]
    return [r for r in records if r["setting"] == config]


def _configs(out):
    from huggingface_hub import DatasetCard

    return [c["config_name"] for c in DatasetCard.load(out / "README.md").data.to_dict()["configs"]]


def test_model_config_names():
    assert model_config(GEMINI) == "model-gemini-3-pro-image-preview"
    assert model_config("FLUX.2 [dev]") == "model-flux-2-dev"
    assert model_config("Qwen/Qwen-Image-Edit") == "model-qwen-qwen-image-edit"


def test_every_config_round_trips(two_models):
    import datasets

    out, records, cache = two_models
    names = _configs(out)
    assert names == ["default", "mirror", "replicate", "model-gemini-3-pro-image-preview", "model-simulated-v1",
                     "endpoints"]
    for name in names:
        ds = datasets.load_dataset(str(out), name, split="train", cache_dir=str(cache))
        want = _expected(records, name)
        assert len(ds) == len(want), name
        assert isinstance(ds.features["image"], datasets.Image)
        raw = ds.cast_column("image", datasets.Image(decode=False))
        got = {(r["chain_id"], r["step"]): r for r in raw}
        assert set(got) == {(r["chain_id"], r["step"]) for r in want}, name
        for r in want:
            row = got[(r["chain_id"], r["step"])]
            assert sha256_bytes(row["image"]["bytes"]) == r["sha256"] == row["sha256"]
            assert row["image"]["path"] == r["image"]
            assert row["model"] == r["model"] and row["parent_sha256"] == r["parent_sha256"]
        assert ds[0]["image"].size == SIZE


def test_streaming_every_config(two_models):
    import datasets

    out, records, _ = two_models
    for name in _configs(out):
        ds = datasets.load_dataset(str(out), name, split="train", streaming=True)
        first = next(iter(ds))
        assert isinstance(first["image"], Image.Image) and first["image"].size == SIZE
        raw = ds.cast_column("image", datasets.Image(decode=False))
        keys = []
        for row in raw:
            assert sha256_bytes(row["image"]["bytes"]) == row["sha256"]
            keys.append((row["chain_id"], row["step"]))
        assert sorted(keys) == sorted((r["chain_id"], r["step"]) for r in _expected(records, name)), name


def test_clean_dataset_verifies(two_models, capsys):
    from banana100.cli import main

    out, records, _ = two_models
    report = verify_dataset(out, decode=True)
    assert report.ok, [str(p) for p in report.problems]
    assert report.rows == len(records) and report.chains == 6
    assert report.configs["endpoints"] == sum(r["step"] in ENDPOINT_STEPS for r in records)
    assert main(["verify", str(out)]) == 0
    assert "OK" in capsys.readouterr().out


# ---------------------------------------------------------------------------------- damaged copies

def _damaged(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _rewrite_row(ds_dir: Path, chain: str, step: int, change) -> None:
    """Rewrite the `data/` shard holding (chain, step) with `change(table, index)`."""
    for f in sorted((ds_dir / "data").rglob("*.parquet")):
        table = pq.read_table(f)
        rows = table.select(["chain_id", "step"]).to_pylist()
        if {"chain_id": chain, "step": step} in rows:
            i = rows.index({"chain_id": chain, "step": step})
            pq.write_table(change(table, i), f)
            return
    raise AssertionError("row not found")


def _problems(ds_dir: Path, kind: str) -> list:
    return [p for p in verify_dataset(ds_dir).problems if p.kind == kind]


CHAIN = "moss__replicate__r0"


def test_verify_flipped_byte(two_models, tmp_path, capsys):
    from banana100.cli import main

    out, records, _ = two_models
    rec = next(r for r in records if r["chain_id"] == CHAIN and r["step"] == 7)  # not an endpoint step
    image = (out.parent / "sim" / rec["image"]).read_bytes()
    ds = _damaged(out, tmp_path / "ds")
    for f in (ds / "data").rglob("*.parquet"):
        data = bytearray(f.read_bytes())
        at = data.find(image)
        if at >= 0:
            data[at + len(image) // 2] ^= 0x01
            f.write_bytes(bytes(data))
            break
    else:
        raise AssertionError("image bytes not found in any shard")
    bad = _problems(ds, "hash")
    assert [(p.chain_id, p.step) for p in bad] == [(CHAIN, 7)]
    assert main(["verify", str(ds)]) != 0
    err = capsys.readouterr()
    assert f"chain '{CHAIN}' step 7" in err.out and "problem" in err.err


def test_verify_missing_step(two_models, tmp_path):
    out, _, _ = two_models
    ds = _damaged(out, tmp_path / "ds")
    _rewrite_row(ds, CHAIN, 7, lambda t, i: pa.concat_tables([t.slice(0, i), t.slice(i + 1)]))
    report = verify_dataset(ds)
    assert [(p.chain_id, p.step) for p in report.problems if p.kind == "gap"] == [(CHAIN, 7)]
    counts = {p.where for p in report.problems if p.kind == "counts"}
    assert {"config default", "config replicate", "config model-simulated-v1"} <= counts
    assert not [p for p in report.problems if p.kind == "parent"]  # step 8 has no step 7 to compare with


def test_verify_broken_parent_link(two_models, tmp_path):
    out, _, _ = two_models
    ds = _damaged(out, tmp_path / "ds")

    def change(t, i):
        col = t.column("parent_sha256").to_pylist()
        col[i] = "0" * 64
        return t.set_column(t.schema.get_field_index("parent_sha256"), t.schema.field("parent_sha256"),
                            pa.array(col, pa.string()))

    _rewrite_row(ds, CHAIN, 7, change)
    report = verify_dataset(ds)
    assert [(p.kind, p.chain_id, p.step) for p in report.problems] == [("parent", CHAIN, 7)]
    assert "broken parent link" in str(report.problems[0])


def test_verify_duplicate_step(two_models, tmp_path):
    out, _, _ = two_models
    ds = _damaged(out, tmp_path / "ds")
    _rewrite_row(ds, CHAIN, 7, lambda t, i: pa.concat_tables([t.slice(0, i + 1), t.slice(i)]))
    report = verify_dataset(ds)
    dup = [p for p in report.problems if p.kind == "duplicate"]
    assert (dup[0].chain_id, dup[0].step) == (CHAIN, 7) and "same image" in dup[0].message
    assert any(p.kind == "counts" and p.where == "config default" for p in report.problems)


def test_verify_reports_an_unreadable_shard(two_models, tmp_path):
    from banana100.dataset.reader import iter_dataset_records

    out, _, _ = two_models
    ds = _damaged(out, tmp_path / "ds")
    shard = sorted((ds / "data").rglob("*.parquet"))[0]
    shard.write_bytes(b"not a parquet file " * 100)
    report = verify_dataset(ds)  # reports, does not raise
    # issue 20: once, by its path in the dataset (the same file name is in every config's folder)
    assert [(p.kind, p.where) for p in report.problems] == [("file", shard.relative_to(ds).as_posix())]
    assert "not a readable Parquet file" in report.problems[0].message
    with pytest.raises(DatasetError, match=f"{shard.name}: not a readable Parquet file"):
        list(iter_dataset_records(ds))


def test_verify_refuses_a_non_dataset_folder(tmp_path):
    with pytest.raises(DatasetError, match="not a dataset folder"):
        verify_dataset(tmp_path)


# ---------------------------------------------------------------------------------- import-chains

def _release_like(folder: Path, steps=6) -> dict:
    """A folder laid out like a downloaded release: {setting}/{source}/rep{repeat}/img_{step:03d}.png."""
    import numpy as np

    rng = np.random.default_rng(5)
    files = {}
    for setting in ("replicate", "mirror"):
        for source in ("moss", "grid"):
            for rep in (0, 1):
                for step in range(steps + 1):
                    p = folder / setting / source / f"rep{rep}" / f"img_{step:03d}.png"
                    p.parent.mkdir(parents=True, exist_ok=True)
                    Image.fromarray(rng.integers(0, 256, (20, 28, 3), dtype=np.uint8)).save(p)
                    files[(f"{source}__{setting}__r{rep}", step)] = p
    (folder / "README.txt").write_text("not an image")
    return files


def test_import_chains_with_a_template(tmp_path, capsys):
    from banana100.cli import main

    files = _release_like(tmp_path / "release")
    run = tmp_path / "run"
    assert main(["import-chains", str(tmp_path / "release"), "--pattern",
                 "{setting}/{source}/rep{repeat}/img_{step:03d}.png", "--model", GEMINI, "--out", str(run)]) == 0
    assert "56 images imported in 8 chains" in capsys.readouterr().out
    records = read_manifest(run)
    assert {(r["chain_id"], r["step"]) for r in records} == set(files)
    by = {(r["chain_id"], r["step"]): r for r in records}
    for (cid, step), path in files.items():
        r = by[(cid, step)]
        assert r["sha256"] == sha256_bytes(path.read_bytes()) == sha256_bytes((run / r["image"]).read_bytes())
        assert (r["width"], r["height"]) == (28, 20)
        assert r["parent_sha256"] == (None if step == 0 else by[(cid, step - 1)]["sha256"])
        assert r["model"] == ("source" if step == 0 else GEMINI)
    assert by[("grid__mirror__r1", 3)]["prompt"].startswith("Mirror")
    # resumable: a second run imports nothing new
    assert main(["import-chains", str(tmp_path / "release"), "--pattern",
                 "{setting}/{source}/rep{repeat}/img_{step:03d}.png", "--model", GEMINI, "--out", str(run)]) == 0
    assert "0 images imported" in capsys.readouterr().out
    assert len(read_manifest(run)) == len(files)
    # ... and the two commands: a verified, documented dataset
    assert main(["build-dataset", str(run), "--out", str(tmp_path / "ds")]) == 0
    assert verify_dataset(tmp_path / "ds").ok
    assert "model-gemini-3-pro-image-preview" in _configs(tmp_path / "ds")


def test_import_chains_with_a_regex_and_gaps(tmp_path):
    from banana100.chains.importer import import_chains

    files = _release_like(tmp_path / "release", steps=4)
    (files[("moss__replicate__r0", 2)]).unlink()
    with pytest.warns(UserWarning, match="missing steps"):
        summary = import_chains(tmp_path / "release", r"re:replicate/(?P<chain>moss)/rep(?P<repeat>\d)/img_(?P<step>\d+)\.png",
                                tmp_path / "run")
    assert summary.chains == 2 and summary.imported == 9 and summary.gaps == {"moss__replicate__r0": [2]}
    by = {(r["chain_id"], r["step"]): r for r in read_manifest(tmp_path / "run")}
    assert by[("moss__replicate__r0", 3)]["parent_sha256"] is None  # after the gap


def test_import_chains_bad_patterns(tmp_path):
    from banana100.chains.importer import compile_pattern
    from banana100.errors import ImportChainsError

    with pytest.raises(ImportChainsError, match="step"):
        compile_pattern("{chain}/x.png")
    with pytest.raises(ImportChainsError, match="unknown field"):
        compile_pattern("{chain}/{frame}.png")
    assert compile_pattern("**/{chain}/step_{step:03d}.png").fullmatch("a/b/c1/step_007.png")["step"] == "007"
    (tmp_path / "f").mkdir()
    with pytest.raises(ImportChainsError, match="no file"):
        from banana100.chains.importer import import_chains

        import_chains(tmp_path / "f", "{chain}/{step}.png", tmp_path / "run")



@pytest.mark.parametrize("options", [
    ["--pattern", "{chain}/x.png"],  # no {step}
    ["--pattern", "{chain}/{frame}_{step}.png"],  # unknown field
    ["--pattern", "re:(?P<chain>[a-z+)/(?P<step>\\d+).png"],  # not a regex
    ["--pattern", "{chain}/{step}.png", "--chat-mode", "sometimes"],
    ["--pattern", "{chain}/{step}.png", "--variant", "a b"],
    ["--pattern", "{chain}/{step}.png", "--setting", "../up"],
    ["--pattern", "{chain}/{step}.png", "--out", "INSIDE"],
])
def test_import_chains_bad_options_exit_with_the_usage_status(tmp_path, capsys, options):
    """A bad option of import-chains is a usage error (status 2, the table's), one line; it was 1."""
    from banana100.cli import main

    _release_like(tmp_path / "release", steps=2)
    args = ["import-chains", str(tmp_path / "release"), *options]
    if "--out" in args:
        args[args.index("INSIDE")] = str(tmp_path / "release" / "run")
    else:
        args += ["--out", str(tmp_path / "run")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("banana100 import-chains: error: ") and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()

# ---------------------------------------------------------------------------------- push --dry-run

def test_push_dry_run(two_models, capsys, monkeypatch):
    from banana100.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out, _, _ = two_models
    assert main(["push", str(out), "--repo-id", "someone/banana100", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "README.md" in text and "endpoints/train-00000-of-" in text and "dry run: nothing uploaded" in text
    assert "commit 1/" in text
    shards = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet"))
    assert all(s in text for s in shards)
    assert main(["push", str(out), "--repo-id", "no-slash", "--dry-run"]) == 2


def test_push_plan_puts_the_card_last(two_models):
    from banana100.dataset.publish import plan_push

    out, _, _ = two_models
    plan = plan_push(out, "a/b", files_per_commit=3)
    assert plan.commits[-1][-1] == "README.md"
    assert all(len(c) <= 4 for c in plan.commits)
    assert sorted(sum(plan.commits, [])) == sorted(p for p, _, _ in plan.files)


# ---------------------------------------------------------------------------------- resumable, parallel

def test_interrupted_build_resumes_and_reuses_finished_shards(tmp_path, monkeypatch):
    make_run(tmp_path / "run", steps=30)
    out = tmp_path / "ds"
    calls = {"n": 0}
    real_row = shards.item_row

    def flaky(item):
        calls["n"] += 1
        if calls["n"] == 70:
            raise KeyboardInterrupt
        return real_row(item)

    monkeypatch.setattr(shards, "item_row", flaky)
    with pytest.raises(KeyboardInterrupt):
        build_dataset([tmp_path / "run"], out, shard_max_bytes=64 * 1024)
    assert not out.exists()
    work = tmp_path / ".ds.building"
    journals = list(work.rglob(".shards.jsonl"))
    finished = {p.stat().st_ino for p in work.rglob(".part-*.parquet")
                if any(p.name in j.read_text() for j in journals)}
    assert finished, "some shards were finished before the interruption"

    monkeypatch.setattr(shards, "item_row", real_row)
    calls["n"] = 0
    monkeypatch.setattr(shards, "item_row", lambda it: (calls.__setitem__("n", calls["n"] + 1), real_row(it))[1])
    checks = []
    real_check = checks_mod.check_image
    monkeypatch.setattr(checks_mod, "check_image", lambda it: (checks.append(it.record["step"]), real_check(it))[1])
    touched = tmp_path / "run" / "moss__mirror__r0" / "step_003.png"
    st = touched.stat()
    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # same bytes, new mtime: checked again
    build_dataset([tmp_path / "run"], out, shard_max_bytes=64 * 1024)
    assert checks == [3], "images checked by the interrupted build are not decoded again"
    assert not work.exists()
    final = {p.stat().st_ino for p in out.rglob("*.parquet")}
    assert finished <= final, "the finished shards were reused, not rewritten"
    assert calls["n"] < 2 * 2 * 31 + 2 * 2 * 5  # fewer rows written than a full build
    assert verify_dataset(out).ok
    fresh = build_dataset([tmp_path / "run"], tmp_path / "fresh", shard_max_bytes=64 * 1024)
    for f in fresh.rglob("*.parquet"):
        assert pq.read_table(f).equals(pq.read_table(out / f.relative_to(fresh)))


def test_changed_rows_are_not_reused(tmp_path, monkeypatch):
    records = make_run(tmp_path / "run", sources=("moss",), settings=("replicate",), steps=10)
    real_row = shards.item_row
    n = {"i": 0}

    def flaky(item):
        n["i"] += 1
        if n["i"] == 9:
            raise KeyboardInterrupt
        return real_row(item)

    monkeypatch.setattr(shards, "item_row", flaky)
    with pytest.raises(KeyboardInterrupt):
        build_dataset([tmp_path / "run"], tmp_path / "ds", shard_max_bytes=64 * 1024)
    monkeypatch.setattr(shards, "item_row", real_row)
    records[0]["prompt"] = "edited after the interruption"
    (tmp_path / "run" / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = build_dataset([tmp_path / "run"], tmp_path / "ds", shard_max_bytes=64 * 1024)
    import datasets

    ds = datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "cache"))
    assert ds.filter(lambda r: r["step"] == 0)[0]["prompt"] == "edited after the interruption"


def test_num_proc_gives_the_same_files(tmp_path):
    make_run(tmp_path / "run", steps=8)
    one = build_dataset([tmp_path / "run"], tmp_path / "one", shard_max_bytes=64 * 1024)
    two = build_dataset([tmp_path / "run"], tmp_path / "two", shard_max_bytes=64 * 1024, num_proc=2)
    files = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(two) for p in two.rglob("*") if p.is_file())
    for f in files:
        if f.suffix == ".parquet":
            assert pq.read_table(one / f).equals(pq.read_table(two / f))
    assert (one / "README.md").read_text() == (two / "README.md").read_text()


# ---------------------------------------------------------------------------------- memory

_MEM_SCRIPT = textwrap.dedent("""
    import io, json, resource, sys, zlib
    from pathlib import Path
    import numpy as np
    from PIL import Image
    from banana100.chains.manifest import sha256_bytes
    from banana100.dataset.build import build_dataset
    from banana100.dataset.verify import verify_dataset

    base, n = Path(sys.argv[1]), int(sys.argv[2])
    run = base / "run"
    rng = np.random.default_rng(0)
    pngs = []
    for i in range(4):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (384, 384, 3), dtype=np.uint8)).save(buf, format="PNG", compress_level=1)
        pngs.append(buf.getvalue())
    lines, parent = [], None
    for k in range(n):
        cid, step = f"c{k // 60}__replicate__r0", k % 60
        chunk = b"tEXt" + k.to_bytes(4, "big")
        data = pngs[k % 4][:-12] + (4).to_bytes(4, "big") + chunk + zlib.crc32(chunk).to_bytes(4, "big") + pngs[k % 4][-12:]
        (run / cid).mkdir(parents=True, exist_ok=True)
        (run / cid / f"step_{step:03d}.png").write_bytes(data)
        sha = sha256_bytes(data)
        lines.append(json.dumps({"chain_id": cid, "source_id": cid.split("__")[0], "setting": "replicate", "repeat": 0,
                                 "step": step, "image": f"{cid}/step_{step:03d}.png", "sha256": sha,
                                 "parent_sha256": None if step == 0 else parent, "editor": "simulated",
                                 "model": "simulated-v1", "width": 384, "height": 384}))
        parent = sha
    (run / "manifest.jsonl").write_text("\\n".join(lines) + "\\n")
    del pngs, data
    import datasets  # imported before the baseline
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    build_dataset([run], base / "ds", num_proc=None)
    after_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert verify_dataset(base / "ds").ok
    after_verify = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    total = sum(p.stat().st_size for p in run.rglob("*.png"))
    print(json.dumps({"before": before * 1024, "build": after_build * 1024, "verify": after_verify * 1024, "total": total}))
""")


def _peak(tmp_path: Path, n: int) -> dict:
    base = tmp_path / f"n{n}"
    base.mkdir()
    p = subprocess.run([sys.executable, "-c", _MEM_SCRIPT, str(base), str(n)], capture_output=True, text=True,
                       env={**os.environ, "TQDM_DISABLE": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.integration  # a build under a memory watch (~6 s)
def test_memory_stays_bounded_while_building(tmp_path):
    """Peak RSS of build + verify does not grow with the number of images (measured, not assumed)."""
    small, large = _peak(tmp_path, 120), _peak(tmp_path, 480)
    assert large["total"] > 3.5 * small["total"] > 150 * 1024**2  # 480 images of ~440 KB: ~210 MB of PNG
    growth_build = large["build"] - small["build"]
    growth_verify = large["verify"] - small["verify"]
    extra_bytes = large["total"] - small["total"]
    assert growth_build < 0.25 * extra_bytes, (small, large)
    assert growth_verify < 0.25 * extra_bytes, (small, large)
