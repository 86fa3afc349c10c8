"""The dataset builder (dataset_script/build.py) and the dataset reader (banana100.dataset.reader).

A tiny run folder is made here (random 32x32 PNGs + a valid manifest), independent of the
chain runner: 2 settings x 2 chains x steps 0..20 = 84 images.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from banana100.dataset.reader import config_patterns, count_dataset_rows, is_dataset_dir, iter_dataset_records
from banana100.dataset.build import build_dataset
from banana100.dataset.verify import verify_dataset
from banana100.dataset.layout import ENDPOINT_STEPS, dataset_features
from banana100.errors import DatasetError, ManifestError
from banana100.chains.manifest import MANIFEST_NAME, sha256_bytes
from banana100.schema import FIELD_NAMES, RECORD_FIELDS

from fixtures.runs import SETTINGS, SIZE, STEPS, make_run


@pytest.fixture
def run(tmp_path) -> tuple[Path, list[dict]]:
    run_dir = tmp_path / "run"
    return run_dir, make_run(run_dir)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One build shared by the read-only tests: (dataset folder, manifest records, cache dir)."""
    base = tmp_path_factory.mktemp("built")
    records = make_run(base / "run")
    # A small shard limit, so that each setting is split over several files.
    out = build_dataset([base / "run"], base / "ds", shard_max_bytes=96 * 1024)
    return out, records, base / "cache"


def _load(out: Path, cache: Path, config: str | None = None):
    import datasets

    args = (str(out),) if config is None else (str(out), config)
    return datasets.load_dataset(*args, split="train", cache_dir=str(cache))


# --------------------------------------------------------------------------------------------


def test_features_follow_the_schema():
    import datasets

    feats = dataset_features()
    assert list(feats) == list(FIELD_NAMES)
    assert isinstance(feats["image"], datasets.Image)
    for f in RECORD_FIELDS:
        if f.name != "image":
            assert feats[f.name] == datasets.Value(f.dtype), f.name
    assert b"huggingface" in feats.arrow_schema.metadata


def test_default_config_loads_with_schema_columns_and_hashes(built):
    import datasets

    out, records, cache = built
    ds = _load(out, cache)
    assert len(ds) == len(records) == 2 * 2 * (STEPS + 1)
    assert ds.column_names == list(FIELD_NAMES)
    assert isinstance(ds.features["image"], datasets.Image)
    assert ds.features == dataset_features()

    raw = ds.cast_column("image", datasets.Image(decode=False))
    by_key = {(r["chain_id"], r["step"]): r for r in records}
    sha_of = {}
    for row in raw:
        rec = by_key[(row["chain_id"], row["step"])]
        assert sha256_bytes(row["image"]["bytes"]) == row["sha256"] == rec["sha256"]
        assert row["image"]["path"] == rec["image"]
        for name in FIELD_NAMES:
            if name != "image":
                assert row[name] == rec.get(name), name
        sha_of[(row["chain_id"], row["step"])] = row["sha256"]
    assert set(sha_of) == set(by_key)
    for cid, step in sha_of:
        parent = raw.filter(lambda r, c=cid, s=step: r["chain_id"] == c and r["step"] == s)[0]["parent_sha256"]
        if step == 0:
            assert parent is None
        else:
            assert parent == sha_of[(cid, step - 1)]

    img = ds[0]["image"]
    assert isinstance(img, Image.Image) and img.size == SIZE


def test_setting_and_endpoints_configs(built):
    out, records, cache = built
    for setting in SETTINGS:
        ds = _load(out, cache, setting)
        assert set(ds["setting"]) == {setting}
        assert len(ds) == sum(r["setting"] == setting for r in records)
    ends = _load(out, cache, "endpoints")
    expected = sorted((r["chain_id"], r["step"]) for r in records if r["step"] in ENDPOINT_STEPS)
    assert sorted(zip(ends["chain_id"], ends["step"], strict=True)) == expected
    assert set(ends["step"]) == {0, 1, 5, 10, 20}  # no step 100 in 20-step chains
    assert ends[0]["image"].size == SIZE


def test_layout_shards_and_row_groups(built):
    import pyarrow.parquet as pq

    out, _, _ = built
    for setting in SETTINGS:
        files = sorted((out / "data" / setting / "simulated-v1").glob("*.parquet"))  # data/<setting>/<model>/
        n = len(files)
        assert n >= 2, "the small shard limit should split each setting"
        assert [f.name for f in files] == [f"train-{i:05d}-of-{n:05d}.parquet" for i in range(n)]
        for f in files:
            assert f.stat().st_size <= 96 * 1024
            meta = pq.ParquetFile(f).metadata
            assert all(meta.row_group(i).num_rows <= 100 for i in range(meta.num_row_groups))
    assert list((out / "endpoints").glob("*.parquet"))
    assert not list(out.rglob(".*")), "no temporary files left behind"
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".ds.")]


def test_card(built):
    from huggingface_hub import DatasetCard

    out, records, _ = built
    card = DatasetCard.load(out / "README.md")
    data = card.data.to_dict()
    # simulated chains from sources whose licences were not given: the card does not invent one
    assert data["license"] == "other" and data["source_datasets"] == ["original"]
    assert data["annotations_creators"] == ["machine-generated"]
    names = [c["config_name"] for c in data["configs"]]
    assert names == ["default", "mirror", "replicate", "model-simulated-v1", "endpoints"]
    infos = {i["config_name"]: i for i in data["dataset_info"]}
    assert set(infos) == set(names)
    assert infos["default"]["splits"][0]["num_examples"] == len(records)
    assert infos["replicate"]["splits"][0]["num_examples"] == len(records) // 2
    assert {f["name"] for f in infos["default"]["features"]} == set(FIELD_NAMES)
    assert "image-to-image" in data["task_categories"]
    text = card.text
    assert "simulated" in text and "not Nano Banana output" in text
    assert "2604.03400" in text
    assert "inherited from the original" not in text and "not recorded for 2 of the 2 source images" in text
    assert "licence of these images is not known" in text
    assert "## Dataset Creation" in text and "### Source data" in text and "| `moss` | not recorded |" in text
    assert 'REPO = "ORG/NAME"' in text and "load_dataset(REPO, \"endpoints\", split=\"train\")" in text
    assert "Produce an exact replica of the provided image, with no alterations." in text  # settings.yaml prompt
    assert "Other prompts found in the data" not in text
    assert data["pretty_name"].endswith("(simulated editor)")
    assert 'evaluate.load("metrics/niqe")' in text


def test_card_licence_of_simulated_chains_is_the_source_images(tmp_path):
    from huggingface_hub import DatasetCard

    make_run(tmp_path / "run")
    licences = tmp_path / "licences.yaml"
    licences.write_text("moss: CC0-1.0\ndunes: cc0-1.0\n")
    out = build_dataset([tmp_path / "run"], tmp_path / "ds", source_licences=licences, repo_id="someone/chains")
    card = DatasetCard.load(out / "README.md")
    assert card.data.license == "cc0-1.0" and card.data.source_datasets == ["original"]
    assert "the licence of every source image" in card.text.replace("\n", " ") or "| `moss` | CC0-1.0 |" in card.text
    assert "| `moss` | CC0-1.0 |" in card.text and "CC BY-NC-SA" not in card.text.split("## Licence")[1].split(
        "The original Banana100 release")[0]
    assert "adds no terms of its own" in card.text and "not known to the toolkit" not in card.text
    assert 'REPO = "someone/chains"' in card.text and "stands for the Hub id" not in card.text
    # different licences per source: `other`, with the table
    licences.write_text("moss: CC0-1.0\ndunes: CC-BY-4.0 (Jane Doe)\n")
    out = build_dataset([tmp_path / "run"], tmp_path / "ds", source_licences=licences)
    card = DatasetCard.load(out / "README.md")
    assert card.data.license == "other" and "| `dunes` | CC-BY-4.0 (Jane Doe) |" in card.text
    assert "keeps the licence of its chain's source image" in card.text


def test_card_licence_of_an_imported_release_is_the_release(tmp_path):
    from huggingface_hub import DatasetCard

    make_run(tmp_path / "run", sources=("moss",), settings=("replicate",), steps=3,
             editor="imported", model="gemini-3-pro-image-preview")
    out = build_dataset([tmp_path / "run"], tmp_path / "ds", source_datasets=["kenantang/Banana100"])
    card = DatasetCard.load(out / "README.md")
    assert card.data.license == "cc-by-nc-sa-4.0" and card.data.source_datasets == ["kenantang/Banana100"]
    assert "inherited from [kenantang/Banana100]" in card.text and "imported (`banana100 import-chains`)" in card.text
    # the same chains without naming the release: no licence is claimed
    out = build_dataset([tmp_path / "run"], tmp_path / "ds2")
    card = DatasetCard.load(out / "README.md")
    assert card.data.license == "other" and "--source-dataset HUB_ID" in card.text
    # the builder's own statement wins
    out = build_dataset([tmp_path / "run"], tmp_path / "ds3", licence="CC-BY-NC-SA-4.0")
    assert DatasetCard.load(out / "README.md").data.license == "cc-by-nc-sa-4.0"


def test_cli_build_dataset_takes_provenance_and_push_writes_the_repo_id(tmp_path, capsys, monkeypatch):
    from huggingface_hub import DatasetCard

    from banana100.cli import main

    make_run(tmp_path / "run", sources=("moss",), settings=("replicate",), steps=2)
    (tmp_path / "lic.yaml").write_text("moss: CC0-1.0\n")
    assert main(["build-dataset", str(tmp_path / "run"), "--out", str(tmp_path / "ds"),
                 "--source-licences", str(tmp_path / "lic.yaml")]) == 0
    assert DatasetCard.load(tmp_path / "ds" / "README.md").data.license == "cc0-1.0"
    assert main(["build-dataset", str(tmp_path / "run"), "--out", str(tmp_path / "ds"),
                 "--source-licences", str(tmp_path / "absent.yaml")]) == 1
    assert "absent.yaml: no such source-licences file" in capsys.readouterr().err
    # push: the card's loading line gets the repo id (recorded upload, no network)
    import huggingface_hub

    uploaded = {}

    class Recorder:
        def __init__(self, token=None):
            pass

        def create_repo(self, *a, **k):
            pass

        def upload_large_folder(self, repo_id, folder_path, **k):
            uploaded[repo_id] = (Path(folder_path) / "README.md").read_text()

    monkeypatch.setattr(huggingface_hub, "HfApi", Recorder)
    before = (tmp_path / "ds" / "README.md").read_text()
    assert 'REPO = "ORG/NAME"' in before and "stands for the Hub id" in before
    assert main(["push", str(tmp_path / "ds"), "--repo-id", "someone/chains"]) == 0
    assert 'REPO = "someone/chains"' in uploaded["someone/chains"]
    assert "stands for the Hub id" not in uploaded["someone/chains"]  # the placeholder's note goes with it
    assert main(["push", str(tmp_path / "ds"), "--repo-id", "someone/chains", "--dry-run"]) == 0
    assert "card: loading lines name someone/chains" in capsys.readouterr().out


def test_card_of_real_editor_rows_has_no_simulated_warning(tmp_path):
    make_run(tmp_path / "run", sources=("moss",), settings=("replicate",), steps=5,
             editor="gemini", model="gemini-3-pro-image-preview")
    out = build_dataset([tmp_path / "run"], tmp_path / "ds")
    text = (out / "README.md").read_text()
    assert "gemini-3-pro-image-preview" in text
    assert "model of the effect" not in text


def test_iter_dataset_records(built):
    out, records, _ = built
    assert is_dataset_dir(out)
    seen = []
    for record, data in iter_dataset_records(out):
        assert "image" not in record
        assert set(record) == set(FIELD_NAMES) - {"image"}
        assert sha256_bytes(data) == record["sha256"]
        seen.append((record["chain_id"], record["step"]))
    assert sorted(seen) == sorted((r["chain_id"], r["step"]) for r in records)
    assert count_dataset_rows(out) == len(records)
    ends = list(iter_dataset_records(out, "endpoints"))
    assert len(ends) == sum(r["step"] in ENDPOINT_STEPS for r in records)
    with pytest.raises(DatasetError, match="no config"):
        next(iter_dataset_records(out, "nope"))


def test_index_rows_and_row_group_images(built):
    from fsspec.implementations.local import LocalFileSystem

    from banana100.dataset.reader import dataset_files, index_rows, row_group_images

    out, records, _ = built
    files = [str(f) for f in dataset_files(out)]
    fs = LocalFileSystem()
    index = list(index_rows(files, ["chain_id", "step", "sha256"], fs))
    assert sorted((r["chain_id"], r["step"]) for *_, r in index) == sorted((r["chain_id"], r["step"]) for r in records)
    fi, g, j, rec = index[-1]
    assert sha256_bytes(row_group_images(files[fi], g, fs)[j].as_py()) == rec["sha256"]


def test_is_dataset_dir(tmp_path, run):
    assert not is_dataset_dir(tmp_path / "missing")
    assert not is_dataset_dir(run[0])
    with pytest.raises(DatasetError, match="not a dataset folder"):
        next(iter_dataset_records(run[0]))


def test_config_patterns_read_every_form_and_stay_inside_the_dataset():
    configs = [{"config_name": "a", "data_files": "data/a/*.parquet"},
               {"config_name": "b", "data_files": ["p/*.parquet", {"split": "train", "path": ["q/*.parquet"]}]},
               {"config_name": "up", "data_files": [{"split": "train", "path": "../x/*.parquet"}]}]
    assert config_patterns(configs, "a", "ds") == ["data/a/*.parquet"]
    assert config_patterns(configs, "b", "ds") == ["p/*.parquet", "q/*.parquet"]
    with pytest.raises(DatasetError, match=r"ds: data_files pattern '\.\./x/\*\.parquet' leaves the dataset"):
        config_patterns(configs, "up", "ds")
    with pytest.raises(DatasetError, match="ds: no config 'c'; the card lists a, b, up"):
        config_patterns(configs, "c", "ds")


def test_corrupted_image_is_named_and_nothing_is_written(tmp_path, run):
    run_dir, records = run
    bad = run_dir / records[7]["image"]
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    out = tmp_path / "ds"
    with pytest.raises(DatasetError, match="corrupted") as e:
        build_dataset([run_dir], out)
    assert str(bad) in str(e.value)
    assert f"step {records[7]['step']}" in str(e.value)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_missing_image_is_named(tmp_path, run):
    run_dir, records = run
    gone = run_dir / records[30]["image"]
    gone.unlink()
    out = tmp_path / "ds"
    with pytest.raises(DatasetError, match="missing") as e:
        build_dataset([run_dir], out)
    assert str(gone) in str(e.value)
    assert not out.exists()


def test_undecodable_image_with_matching_hash(tmp_path, run):
    run_dir, records = run
    rec = records[3]
    path = run_dir / rec["image"]
    junk = path.read_bytes()[: 60]  # truncated PNG, re-hashed so that only decoding fails
    path.write_bytes(junk)
    lines = []
    for r in records:
        if r is rec:
            r = dict(r, sha256=sha256_bytes(junk))
        elif r["parent_sha256"] == rec["sha256"]:
            r = dict(r, parent_sha256=sha256_bytes(junk))
        lines.append(json.dumps(r))
    (run_dir / MANIFEST_NAME).write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError) as e:
        build_dataset([run_dir], tmp_path / "ds")
    assert str(path) in str(e.value)


def test_missing_manifest_propagates(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ManifestError):
        build_dataset([tmp_path / "empty"], tmp_path / "ds")


def test_merge_runs_and_reject_duplicate_chains(tmp_path):
    a = make_run(tmp_path / "a", sources=("moss",), steps=3, seed=1)
    b = make_run(tmp_path / "b", sources=("dunes",), steps=3, seed=2)
    out = build_dataset([tmp_path / "a", tmp_path / "b"], tmp_path / "ds")
    rows = list(iter_dataset_records(out))
    assert len(rows) == len(a) + len(b)

    make_run(tmp_path / "c", sources=("moss",), steps=3, seed=3)
    with pytest.raises(DatasetError, match="two run folders"):
        build_dataset([tmp_path / "a", tmp_path / "c"], tmp_path / "ds2")
    assert not (tmp_path / "ds2").exists()


def test_broken_parent_link_is_an_error(tmp_path, run):
    run_dir, records = run
    records[5]["parent_sha256"] = "0" * 64
    (run_dir / MANIFEST_NAME).write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(DatasetError, match="parent_sha256"):
        build_dataset([run_dir], tmp_path / "ds")


def test_overwrite_rules(tmp_path):
    make_run(tmp_path / "run", sources=("moss",), settings=("replicate",), steps=2)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="refusing to overwrite"):
        build_dataset([tmp_path / "run"], other)
    assert (other / "notes.txt").read_text() == "mine"

    out = build_dataset([tmp_path / "run"], tmp_path / "ds")
    (out / "stale.txt").write_text("a user's file")
    build_dataset([tmp_path / "run"], out)  # a previous build's own files are replaced, nothing else
    assert (out / "stale.txt").read_text() == "a user's file"  # issue 20: docs/data-safety.md
    assert is_dataset_dir(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "other", "run"]

    empty = tmp_path / "empty"
    empty.mkdir()
    build_dataset([tmp_path / "run"], empty)
    assert is_dataset_dir(empty)


def test_card_of_mixed_editors(tmp_path):
    from huggingface_hub import DatasetCard

    make_run(tmp_path / "g", sources=("moss",), settings=("replicate",), steps=3,
             editor="gemini", model="gemini-3-pro-image-preview")
    make_run(tmp_path / "s", sources=("dunes",), settings=("replicate",), steps=3)
    out = build_dataset([tmp_path / "g", tmp_path / "s"], tmp_path / "ds")
    card = DatasetCard.load(out / "README.md")
    assert "partly simulated" in card.data.pretty_name
    assert "3 of the 6 edited images" in card.text


def test_cli_build_dataset(tmp_path, capsys):
    from banana100.cli import main

    make_run(tmp_path / "run", sources=("moss",), settings=("replicate",), steps=2)
    assert main(["build-dataset", str(tmp_path / "run"), "--out", str(tmp_path / "ds")]) == 0
    assert is_dataset_dir(tmp_path / "ds")
    (tmp_path / "run" / "moss__replicate__r0" / "step_001.png").unlink()
    assert main(["build-dataset", str(tmp_path / "run"), "--out", str(tmp_path / "ds2")]) == 1  # a data problem
    assert "step_001.png" in capsys.readouterr().err


class _FillsUp:
    """A file that takes `room` bytes, then fails as a full disk does (ENOSPC), as a binary file object."""

    def __init__(self, path, room):
        self._file, self._room = open(path, "wb"), room

    def write(self, data):
        n = memoryview(data).nbytes
        if self._room < n:
            import errno

            raise OSError(errno.ENOSPC, "No space left on device")
        self._room -= n
        return self._file.write(data)

    def __getattr__(self, name):
        return getattr(self._file, name)


@pytest.mark.parametrize("num_proc", [None, 2])
def test_a_full_disk_is_one_line_naming_the_file_and_the_rerun_resumes(tmp_path, monkeypatch, capsys, num_proc):
    """Issue 44 item 6: a disk that filled while Arrow's column writer wrote a page aborted the process (rc 134,
    "Check failed: _s.ok()"; a 7 MB tmpfs); with --num-proc 2 a 35-line BrokenProcessPool traceback. The shard
    writer keeps the write error from Arrow and raises it itself, naming the file."""
    import builtins

    from banana100.cli import main
    from banana100.dataset import shards

    make_run(tmp_path / "run", sources=("moss", "dunes"), steps=6)
    monkeypatch.setattr(shards, "open", lambda path, mode="r", *a, **k: _FillsUp(path, 40_000) if mode == "wb"
                        and str(path).endswith(".parquet") else builtins.open(path, mode, *a, **k), raising=False)
    extra = ["--num-proc", str(num_proc)] if num_proc else []
    assert main(["build-dataset", str(tmp_path / "run"), "--out", str(tmp_path / "ds"), *extra]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "%|" not in line and line.strip()]
    assert len(err) == 1 and "banana100 build-dataset: error: cannot write " in err[0], err
    assert ".part-00000.parquet: no space left on device; make room and run the same command again" in err[0]
    monkeypatch.undo()  # room again: the rerun finishes, and the result verifies
    assert main(["build-dataset", str(tmp_path / "run"), "--out", str(tmp_path / "ds"), *extra]) == 0
    assert verify_dataset(tmp_path / "ds").ok


@pytest.mark.integration  # mounts small tmpfs folders (root only) and builds eight times in subprocesses (~40 s)
def test_a_real_full_disk_never_aborts(tmp_path, monkeypatch):
    """The reproduction itself: 12 MB of images into tmpfs folders of 5 to 8 MB. Arrow aborted the build at 7 MB
    (rc 134) before the shard writer kept its write errors. Skipped where a tmpfs cannot be mounted."""
    import os
    import subprocess
    import sys

    import fixtures.runs as runs

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    monkeypatch.setattr(runs, "SIZE", (200, 150))
    make_run(tmp_path / "run", sources=("moss", "dunes", "sky"), steps=20)
    disk = tmp_path / "disk"
    disk.mkdir()
    for size in (5, 6, 7, 8):
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}m", "tmpfs", str(disk)]).returncode:
            pytest.skip("cannot mount a tmpfs here")
        try:
            for num_proc in ("1", "2"):
                got = subprocess.run([sys.executable, "-m", "banana100", "build-dataset", str(tmp_path / "run"),
                                      "--out", str(disk / "ds"), "--num-proc", num_proc], capture_output=True, text=True)
                lines = [line for line in got.stderr.splitlines() if "%|" not in line and line.strip()]
                assert got.returncode == 1 and len(lines) == 1, (size, num_proc, got.returncode, got.stderr[-2000:])
                assert "no space left on device; make room and run the same command again" in lines[0]
        finally:
            subprocess.run(["umount", str(disk)])


def test_the_size_category_boundaries():
    """The Hub's size_categories tags: each boundary belongs to the bigger category (1,000 rows is 1K<n<10K)."""
    from banana100.dataset.card import size_category

    expected = {0: "n<1K", 999: "n<1K", 1_000: "1K<n<10K", 9_999: "1K<n<10K", 10_000: "10K<n<100K",
                99_999: "10K<n<100K", 100_000: "100K<n<1M", 999_999: "100K<n<1M", 1_000_000: "1M<n<10M",
                9_999_999: "1M<n<10M", 10_000_000: "10M<n<100M"}
    assert {n: size_category(n) for n in expected} == expected
