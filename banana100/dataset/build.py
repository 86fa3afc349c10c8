"""Build a Hub-ready Banana100 dataset folder from run folders.

    build_dataset([Path("runs/a"), Path("runs/b")], Path("banana100-dataset"), num_proc=4)

reads each run folder's `manifest.jsonl` (fields: `banana100.schema.RECORD_FIELDS`), checks
every image (present, SHA-256 equal to the manifest's, decodable, of the recorded size), and
writes a folder that `datasets.load_dataset(folder)` loads exactly as it would from the Hub:

    README.md                                            the card: YAML configs + dataset_info, prose
    data/<setting>/<model>/train-00000-of-0000N.parquet  the chains of one setting and editor model
    endpoints/train-00000-of-0000M.parquet               steps 0, 1, 5, 10, 20, 100 only

Configs: `default` (`data/*/*/*.parquet`), one per setting (`data/<setting>/*/*.parquet`), one
per editor model (`model-<slug>`: `data/*/<slug>/*.parquet`; a chain belongs to the model of its
edited steps, its step-0 source with it) and `endpoints`; one split, `train`. The setting and
model configs are views of the same files, so only `endpoints` costs extra storage.

Images are embedded untouched: the `image` column is the `datasets.Image()` struct
`{bytes, path}` with the file's original bytes and its path in the run folder
(`<chain_id>/step_000.png`). Parquet files are written the way `datasets` writes them
(`push_to_hub`): the features' Arrow schema with its `huggingface` metadata, image bytes
stored uncompressed and PLAIN-encoded, page index, content-defined chunking; row groups of at
most 100 rows and about 100 MB, shards of at most 500 MB (the Hub's recommendation). Writing
streams: at most one row group of image bytes is held in memory (per process). The layout
was chosen by measurement against raw files and WebDataset shards: bench/dataset_layout.py,
BENCHMARKS.md ("Dataset layout").

The folder is built in `.<name>.building` next to `out_dir` and renamed into place at the
end, so a failed build never leaves half a dataset at `out_dir`; an interrupted build is
resumed by running it again: each finished shard is journalled with a key of its rows
(records, hence image hashes) and reused when the rows are unchanged, and the images already
checked (unchanged since, by size and modification time) are not decoded again.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import warnings
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image, UnidentifiedImageError

from banana100 import about
from banana100.errors import DatasetError
from banana100.chains.manifest import MANIFEST_NAME, read_manifest, sha256_bytes
from banana100.schema import RECORD_FIELDS

SPLIT = "train"
ENDPOINT_STEPS = (0, 1, 5, 10, 20, 100)
ENDPOINTS_CONFIG = "endpoints"
DEFAULT_CONFIG = "default"
DATA_DIR = "data"
ENDPOINTS_DIR = "endpoints"
CARD_NAME = "README.md"
CARD_TEMPLATE = "card_template.md"
#: The Hub id in the card's loading lines until the folder is pushed (`banana100 push` writes the
#: real one into the `REPO = "..."` line; `build-dataset --repo-id` sets it at build time).
REPO_PLACEHOLDER = "ORG/NAME"
REPO_LINE = re.compile(r'^REPO = "[^"\n]*"', re.MULTILINE)

#: The Hub's recommended maximum size of one Parquet file (`datasets.config.MAX_SHARD_SIZE`).
SHARD_MAX_BYTES = 500 * 1024**2
#: Rows per row group: `datasets` and the dataset viewer use ~100 for image datasets, so that
#: reading one row (random access, the viewer) reads at most 100 images.
ROW_GROUP_ROWS = 100
#: ...and a row group is also closed at about this size (`datasets.config.MAX_ROW_GROUP_SIZE`),
#: which bounds the memory a writer or a reader needs for large images.
ROW_GROUP_MAX_BYTES = 100 * 1024**2

_IMAGE_COLUMN = "image"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_RESERVED_CONFIGS = (DEFAULT_CONFIG, ENDPOINTS_CONFIG)
_MAX_LISTED_PROBLEMS = 20
_NO_STATISTICS = ("prompt", "thought_summary", "generation_config", "editor_info", "finish_reason")


# ---------------------------------------------------------------------------------------------
# Features


def dataset_features():
    """`datasets.Features` of a dataset row, built from `banana100.schema.RECORD_FIELDS`.

    Every field keeps its dtype, in schema order, except `image`: a path in the manifest, the
    embedded image (`datasets.Image()`) in the dataset.
    """
    import datasets

    feats = {}
    for f in RECORD_FIELDS:
        feats[f.name] = datasets.Image() if f.name == _IMAGE_COLUMN else datasets.Value(f.dtype)
    return datasets.Features(feats)


def _parquet_writer_options(features, schema: pa.Schema) -> dict:
    """The ParquetWriter options `datasets` itself uses (datasets.arrow_writer.ParquetWriter)."""
    try:
        from datasets.arrow_writer import get_parquet_column_options

        options = dict(get_parquet_column_options(features, schema))
    except ImportError:  # older datasets: same policy, written out
        options = {
            "compression": {
                **{f.name: "snappy" for f in schema if f.name != _IMAGE_COLUMN},
                f"{_IMAGE_COLUMN}.bytes": "none",
                f"{_IMAGE_COLUMN}.path": "none",
            },
            "use_dictionary": [f.name for f in schema if f.name != _IMAGE_COLUMN],
            "column_encoding": {f"{_IMAGE_COLUMN}.bytes": "PLAIN", f"{_IMAGE_COLUMN}.path": "PLAIN"},
        }
    options["write_page_index"] = True
    # Statistics (min/max in the footer and the page index) only where they help filtering:
    # not for image bytes (up to 4 KiB per page and row group, for nothing) nor free text.
    options["write_statistics"] = [
        f.name for f in RECORD_FIELDS if f.name != _IMAGE_COLUMN and f.name not in _NO_STATISTICS
    ]
    try:
        from datasets.config import DEFAULT_CDC_OPTIONS

        options["use_content_defined_chunking"] = dict(DEFAULT_CDC_OPTIONS)
    except ImportError:
        pass
    return options


# ---------------------------------------------------------------------------------------------
# Reading and checking the run folders


@dataclass(frozen=True)
class _Item:
    run_dir: Path
    record: dict

    @property
    def path(self) -> Path:
        return self.run_dir / self.record["image"]

    @property
    def where(self) -> str:
        return f"chain {self.record['chain_id']!r} step {self.record['step']}"


def collect_items(run_dirs: list[Path]) -> list[_Item]:
    """Every record of the run folders, merged, checked for collisions, in dataset order.

    Raises ManifestError (from `read_manifest`) for a folder without a valid manifest and
    DatasetError for a chain found in two run folders, a broken parent link or an unusable
    setting name.
    """
    if not run_dirs:
        raise DatasetError("no run folders given")
    seen_dirs: set[Path] = set()
    owner: dict[str, Path] = {}
    items: list[_Item] = []
    for run_dir in run_dirs:
        run_dir = Path(run_dir)
        key = run_dir.resolve()
        if key in seen_dirs:
            warnings.warn(f"{run_dir}: run folder given twice; reading it once", stacklevel=3)
            continue
        seen_dirs.add(key)
        records = read_manifest(run_dir)  # ManifestError propagates
        chains_here = set()
        for record in records:
            cid = record["chain_id"]
            if cid in owner and owner[cid] != run_dir:
                raise DatasetError(
                    f"chain {cid!r} appears in two run folders, {owner[cid]} and {run_dir}: a chain must come "
                    "from one run (rename or drop one of them before merging)"
                )
            owner[cid] = run_dir
            chains_here.add(cid)
            items.append(_Item(run_dir, record))
    if not items:
        raise DatasetError(f"the run folders {', '.join(map(str, run_dirs))} hold no images (empty manifests)")

    settings = sorted({it.record["setting"] for it in items})
    for s in settings:
        if not _SAFE_NAME.match(s) or s in _RESERVED_CONFIGS:
            raise DatasetError(
                f"setting name {s!r} cannot be a dataset config (it must match {_SAFE_NAME.pattern} "
                f"and not be one of {_RESERVED_CONFIGS})"
            )
    items.sort(key=lambda it: (it.record["setting"], it.record["chain_id"], it.record["step"]))
    _check_chains(items)
    return items


def _check_chains(items: list[_Item]) -> None:
    problems = []
    by_chain: dict[str, list[_Item]] = defaultdict(list)
    for it in items:
        by_chain[it.record["chain_id"]].append(it)
    for cid, chain in by_chain.items():
        keys = {(it.record["setting"], it.record["source_id"], it.record["repeat"]) for it in chain}
        if len(keys) > 1:
            problems.append(f"chain {cid!r}: records disagree on setting/source_id/repeat: {sorted(keys)}")
        by_step = {it.record["step"]: it for it in chain}
        for it in chain:
            k = it.record["step"]
            parent = by_step.get(k - 1)
            if k > 0 and parent is not None and it.record["parent_sha256"] != parent.record["sha256"]:
                problems.append(
                    f"{it.path} ({it.where}): parent_sha256 does not match step {k - 1}'s sha256 "
                    f"({parent.path}): the chain's lineage is broken"
                )
        steps = sorted(by_step)
        missing = sorted(set(range(steps[0], steps[-1] + 1)) - set(steps))
        if steps[0] != 0 or missing:
            warnings.warn(
                f"chain {cid!r} is incomplete (steps {steps[0]}..{steps[-1]}, missing {missing or 'step 0'}); "
                "its images are included as they are",
                stacklevel=4,
            )
    _raise_problems("the run folders' chains are inconsistent", problems)


def _raise_problems(headline: str, problems: list[str]) -> None:
    if not problems:
        return
    shown = "\n  ".join(problems[:_MAX_LISTED_PROBLEMS])
    more = len(problems) - _MAX_LISTED_PROBLEMS
    tail = f"\n  ... and {more} more" if more > 0 else ""
    raise DatasetError(f"{headline} ({len(problems)} problem{'s' if len(problems) > 1 else ''}):\n  {shown}{tail}")


def _check_image(item: _Item) -> str | None:
    """None when the image is fine, else a message that names the file and the chain step."""
    path = item.path
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return f"{path}: missing image file ({item.where})"
    except OSError as e:
        return f"{path}: cannot read ({e.strerror}) ({item.where})"
    digest = sha256_bytes(data)
    if digest != item.record["sha256"]:
        return (
            f"{path}: corrupted: its SHA-256 is {digest[:16]}..., the manifest says "
            f"{item.record['sha256'][:16]}... ({item.where})"
        )
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.verify()  # container-level checks (PNG chunk CRCs)
        with Image.open(io.BytesIO(data)) as im:
            im.load()  # full decode: catches truncated or broken pixel data
            size = im.size
    except UnidentifiedImageError:
        return f"{path}: not an image file PIL can read ({item.where})"
    except Exception as e:  # noqa: BLE001 - PIL raises many types for broken files
        return f"{path}: corrupt image that does not decode ({type(e).__name__}: {e}) ({item.where})"
    expected = (item.record["width"], item.record["height"])
    if size != expected:
        return f"{path}: image is {size[0]}x{size[1]} but the manifest says {expected[0]}x{expected[1]} ({item.where})"
    return None


def _stat_key(item: _Item) -> str | None:
    """An image as checked: its path, size, modification time and expected hash."""
    try:
        st = item.path.stat()
    except OSError:
        return None
    return f"{item.path.resolve()}\t{st.st_size}\t{st.st_mtime_ns}\t{item.record['sha256']}"


def verify_images(items: list[_Item], workers: int | None = None, processes: bool = False,
                  already_checked: set[str] | frozenset = frozenset()) -> None:
    """Check every image; raise one DatasetError listing every bad file (path, chain, step).

    Threads by default (hashing and PNG decoding release the GIL); `processes=True` spreads the
    work over `workers` processes instead. Images whose `_stat_key` is in `already_checked`
    (checked by an interrupted earlier build, unchanged since) are not decoded again.
    """
    for it in items:  # a manifest path must not leave its run folder
        rel = Path(it.record["image"])
        if rel.is_absolute() or ".." in rel.parts:
            raise DatasetError(f"{it.run_dir / MANIFEST_NAME}: image path {it.record['image']!r} leaves the run folder")
    if already_checked:
        items = [it for it in items if _stat_key(it) not in already_checked]
    workers = workers or min(8, os.cpu_count() or 1)
    if processes and workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context())
        chunk = max(1, min(64, len(items) // (workers * 8)))
    else:
        pool, chunk = ThreadPoolExecutor(max_workers=workers), 1
    with pool:
        results = pool.map(_check_image, items, chunksize=chunk)
        problems = [p for p in _progress(results, len(items), "checking images") if p]
    _raise_problems("cannot build the dataset: some images are missing or damaged", problems)


# ---------------------------------------------------------------------------------------------
# Writing Parquet shards


class _ShardWriter:
    """Writes rows into `folder/train-XXXXX-of-YYYYY.parquet` shards, streaming.

    Rows are buffered until a row group is full (ROW_GROUP_ROWS rows or ROW_GROUP_MAX_BYTES),
    then written; a shard is closed before a row would push it past `max_bytes` (a single
    row larger than that gets a shard of its own).
    """

    # Parquet footer and page index, written at close: measured at ~5 KiB plus ~4 KiB per row
    # group (23 columns, statistics on the small columns only); estimated at twice that.
    _FOOTER_BASE = 16 * 1024
    _FOOTER_PER_ROW_GROUP = 8 * 1024
    _ROW_OVERHEAD = 512  # the non-image columns of one row, uncompressed upper bound-ish

    def __init__(self, folder: Path, features, max_bytes: int):
        self.folder = folder
        self.features = features
        self.schema = features.arrow_schema
        self.options = _parquet_writer_options(features, self.schema)
        self.max_bytes = max_bytes
        self.parts: list[Path] = []
        self.num_rows = 0
        self.num_bytes = 0  # Arrow (in-memory) bytes, as datasets reports them
        self._pending: list[dict] = []
        self._pending_bytes = 0
        self._sink = None
        self._writer = None
        self._shard_rows = 0
        self._shard_groups = 0
        self._shard_bytes = 0
        self._shard_key = hashlib.sha256()
        self.journal: Path | None = None  # finished shards are recorded here (resumable builds)

    def adopt(self, part: Path, rows: int, num_bytes: int) -> None:
        """Take over a finished shard of an interrupted build (see `_write_shards`)."""
        self.parts.append(part)
        self.num_rows += rows
        self.num_bytes += num_bytes

    def _row_bytes(self, row: dict) -> int:
        extra = sum(len(v) for k, v in row.items() if isinstance(v, str) and k != _IMAGE_COLUMN)
        return len(row[_IMAGE_COLUMN]["bytes"]) + len(row[_IMAGE_COLUMN]["path"]) + extra + self._ROW_OVERHEAD

    def _footer(self, groups: int) -> int:
        return self._FOOTER_BASE + self._FOOTER_PER_ROW_GROUP * groups

    def add(self, row: dict, key: bytes = b"") -> None:
        size = self._row_bytes(row)
        if self._shard_rows or self._pending:
            written = self._sink.tell() if self._sink is not None else 0
            groups = self._shard_groups + 2  # the open row group, and one more if it fills up
            if written + self._pending_bytes + size + self._footer(groups) > self.max_bytes:
                self._flush()
                self._close_shard()
        self._shard_key.update(key)
        self._pending.append(row)
        self._pending_bytes += size
        if len(self._pending) >= ROW_GROUP_ROWS or self._pending_bytes >= ROW_GROUP_MAX_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f".part-{len(self.parts):05d}.parquet"
            self.parts.append(path)
            self._sink = pa.OSFile(str(path), "wb")
            try:
                self._writer = pq.ParquetWriter(self._sink, self.schema, **self.options)
            except TypeError:  # pyarrow without content-defined chunking
                self.options.pop("use_content_defined_chunking", None)
                self._writer = pq.ParquetWriter(self._sink, self.schema, **self.options)
            cdc = self.options.get("use_content_defined_chunking")
            if cdc:
                self._writer.add_key_value_metadata({"content_defined_chunking": json.dumps(cdc)})
        table = pa.Table.from_pylist(self._pending, schema=self.schema)
        self._writer.write_table(table, row_group_size=len(self._pending))
        self.num_rows += table.num_rows
        self.num_bytes += table.nbytes
        self._shard_bytes += table.nbytes
        self._shard_rows += table.num_rows
        self._shard_groups += 1
        self._pending = []
        self._pending_bytes = 0

    def _close_shard(self, record: bool = True) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            part = self.parts[-1]
            if record and self.journal is not None:
                with open(part, "rb") as f:
                    os.fsync(f.fileno())
                entry = {"part": part.name, "rows": self._shard_rows, "num_bytes": self._shard_bytes,
                         "size": part.stat().st_size, "key": self._shard_key.hexdigest(),
                         "max_bytes": self.max_bytes, "format": _SHARD_FORMAT}
                with open(self.journal, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
        self._writer = self._sink = None
        self._shard_rows = self._shard_groups = self._shard_bytes = 0
        self._shard_key = hashlib.sha256()

    def close(self) -> list[Path]:
        """Finish the last shard (its final `train-i-of-n` name comes from `_finalize_shards`)."""
        self._flush()
        self._close_shard()
        return self.parts

    def abort(self) -> None:
        with contextlib.suppress(Exception):  # already failing: keep the first error
            self._close_shard(record=False)


def _row(item: _Item) -> dict:
    """The dataset row of one item, with its image bytes (re-checked against the manifest)."""
    data = item.path.read_bytes()
    if sha256_bytes(data) != item.record["sha256"]:
        raise DatasetError(f"{item.path}: changed on disk while the dataset was being built ({item.where})")
    row = {f.name: item.record.get(f.name) for f in RECORD_FIELDS}
    row[_IMAGE_COLUMN] = {"bytes": data, "path": Path(item.record["image"]).as_posix()}
    return row


@dataclass
class _ConfigStats:
    num_rows: int = 0
    num_bytes: int = 0  # Arrow bytes (dataset_size)
    download_size: int = 0  # Parquet file bytes
    files: int = 0


def _progress(iterable, total: int, desc: str):
    """A tqdm bar on a terminal, silent elsewhere (tests, logs)."""
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="img", disable=None, leave=False)


_JOURNAL = ".shards.jsonl"
_CHECKED = ".checked-images"  # images an interrupted build checked (see `verify_images`)
#: Bump when the bytes written for the same rows change (writer options, schema): an interrupted
#: build's shards are then rewritten instead of reused.
_SHARD_FORMAT = 1
_FINAL_NAME = re.compile(rf"^{SPLIT}-(\d{{5}})-of-\d{{5}}\.parquet$")


def _row_key(item: _Item) -> bytes:
    """What a shard's content is keyed by: the full record (its `sha256` pins the image bytes)."""
    return json.dumps(item.record, sort_keys=True, ensure_ascii=False).encode() + b"\n"


def _shard_key(items: list[_Item]) -> str:
    h = hashlib.sha256()
    for it in items:
        h.update(_row_key(it))
    return h.hexdigest()


def _resume(folder: Path, items: list[_Item], writer: _ShardWriter) -> int:
    """Adopt the finished shards an interrupted build left in `folder`; return the rows they hold.

    A shard is reused only when its journal entry matches: same position, same file size, same
    writer format and shard limit, and the same rows (records, hence image hashes) in the same
    order. Everything after the first mismatch, and any half-written shard, is deleted.
    """
    journal = folder / _JOURNAL
    if not folder.is_dir():
        return 0
    for f in folder.glob(f"{SPLIT}-*.parquet"):  # interrupted while giving the final names
        m = _FINAL_NAME.match(f.name)
        if m:
            os.replace(f, folder / f".part-{m.group(1)}.parquet")
    entries = []
    if journal.is_file():
        for line in journal.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                entries.append(json.loads(line))
    pos = 0
    kept = []
    for entry in entries:
        part = folder / f".part-{len(writer.parts):05d}.parquet"
        n = entry.get("rows", 0)
        if (
            entry.get("part") != part.name
            or entry.get("format") != _SHARD_FORMAT
            or entry.get("max_bytes") != writer.max_bytes
            or not part.is_file()
            or part.stat().st_size != entry.get("size")
            or n <= 0
            or pos + n > len(items)
            or _shard_key(items[pos : pos + n]) != entry.get("key")
        ):
            break
        writer.adopt(part, n, entry["num_bytes"])
        kept.append(entry)
        pos += n
    keep = {p.name for p in writer.parts}
    for f in folder.iterdir():
        if f.name != _JOURNAL and f.name not in keep:
            if f.is_dir():
                shutil.rmtree(f)
            else:
                f.unlink()
    journal.write_text("".join(json.dumps(e) + "\n" for e in kept), encoding="utf-8")
    return pos


def _write_shards(items: list[_Item], folder: Path, features, max_bytes: int, desc: str) -> _ShardWriter:
    """Write `items` as Parquet shards into `folder`, reusing the finished shards of an earlier,
    interrupted attempt (keyed by their content, see `_resume`)."""
    writer = _ShardWriter(folder, features, max_bytes)
    done = _resume(folder, items, writer)
    folder.mkdir(parents=True, exist_ok=True)
    writer.journal = folder / _JOURNAL
    try:
        for it in _progress(items[done:], len(items) - done, f"writing {desc}"):
            writer.add(_row(it), _row_key(it))
        writer.close()
    except BaseException:
        writer.abort()
        raise
    return writer


def _finalize_shards(folder: Path) -> list[Path]:
    """Give a finished folder's shards their `train-i-of-n` names."""
    parts = sorted(folder.glob(".part-*.parquet"))
    n = len(parts)
    final = []
    for i, part in enumerate(parts):
        target = part.with_name(f"{SPLIT}-{i:05d}-of-{n:05d}.parquet")
        os.replace(part, target)
        final.append(target)
    return final  # the journal stays until the whole build is done (see `build_dataset`)


def _write_group(args) -> tuple[int, int, list[int]]:
    """One data folder (a worker's job with --num-proc): (rows, Arrow bytes, shard sizes)."""
    items, folder, max_bytes, desc = args
    writer = _write_shards(items, folder, dataset_features(), max_bytes, desc)
    return writer.num_rows, writer.num_bytes, [p.stat().st_size for p in writer.parts]


def model_slug(model: str) -> str:
    """Folder name for an editor model id: lower case, runs of other characters as `-`."""
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
    return slug or "unknown"


def model_config(model: str) -> str:
    """Config name of an editor model: `model-<slug>` (`gemini-3-pro-image-preview` ->
    `model-gemini-3-pro-image-preview`, `FLUX.2 [dev]` -> `model-flux-2-dev`)."""
    return f"model-{model_slug(model)}"


def chain_models(items: list[_Item]) -> dict[str, str]:
    """The editor model of each chain: the model of its edited steps (the most frequent one
    should they differ); `source` for a chain that has only its step 0."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for it in items:
        counts[it.record["chain_id"]]  # every chain has an entry
        if it.record["step"] > 0:
            counts[it.record["chain_id"]][it.record["model"]] += 1
    return {cid: (sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if c else "source")
            for cid, c in counts.items()}


# ---------------------------------------------------------------------------------------------
# The card


def _size_category(n: int) -> str:
    for limit, name in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
    ):
        if n < limit:
            return name
    return "10M<n<100M"


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            if unit == "B":
                return f"{n} B"
            return f"{size:.0f} {unit}" if size == int(size) else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _card_context(items: list[_Item], stats: dict[str, _ConfigStats], shard_max_bytes: int,
                  model_configs: dict[str, str] | None = None) -> dict:
    from banana100.errors import SettingError
    from banana100.chains.settings import load_settings

    try:
        known = load_settings()
    except SettingError:
        known = {}
    records = [it.record for it in items]
    chains = defaultdict(list)
    for r in records:
        chains[r["chain_id"]].append(r["step"])

    made_by = Counter((r["editor"], r["model"]) for r in records if r["step"] > 0)
    sources = Counter((r["editor"], r["model"]) for r in records if r["step"] == 0)
    chains_by_editor: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in records:
        if r["step"] > 0:
            chains_by_editor[(r["editor"], r["model"])].add(r["chain_id"])
    editors = [
        {"editor": e, "model": m, "rows": n, "chains": len(chains_by_editor[(e, m)])}
        for (e, m), n in sorted(made_by.items(), key=lambda kv: -kv[1])
    ]
    simulated_rows = sum(n for (e, _), n in made_by.items() if e == "simulated")

    settings = []
    for name in sorted({r["setting"] for r in records}):
        rows = [r for r in records if r["setting"] == name]
        data_prompts = list(dict.fromkeys(r["prompt"] for r in rows if r.get("prompt")))
        s = known.get(name)
        listed = list(s.prompts) if s else []
        settings.append(
            {
                "name": name,
                "description": s.description if s else "(not in this toolkit's generation/settings.yaml)",
                "prompts": listed or data_prompts,
                "other_prompts": [p for p in data_prompts if p not in listed] if listed else [],
                "chains": len({r["chain_id"] for r in rows}),
                "sources": len({r["source_id"] for r in rows}),
                "rows": len(rows),
                "max_step": max(r["step"] for r in rows),
            }
        )

    model_of_config = {c: m for m, c in (model_configs or {}).items()}
    configs = []
    for name, st in stats.items():
        if name == DEFAULT_CONFIG:
            what, where = "every image of every chain", f"`{DATA_DIR}/*/*/*.parquet`"
        elif name == ENDPOINTS_CONFIG:
            what, where = f"steps {', '.join(map(str, ENDPOINT_STEPS))} only", f"`{ENDPOINTS_DIR}/*.parquet`"
        elif name in model_of_config:
            m = model_of_config[name]
            what = f"the chains edited by `{m}` (with their step-0 sources)"
            where = f"`{DATA_DIR}/*/{model_slug(m)}/*.parquet`"
        else:
            what, where = f"the `{name}` setting", f"`{DATA_DIR}/{name}/*/*.parquet`"
        configs.append(
            {"name": name, "what": what, "where": where, "rows": st.num_rows, "files": st.files,
             "size": _human_bytes(st.download_size)}
        )

    fields = []
    for f in RECORD_FIELDS:
        if f.name == _IMAGE_COLUMN:
            fields.append(
                {"name": f.name, "dtype": "Image",
                 "doc": "The image, its original file bytes untouched (decoded to PIL by `datasets`); "
                        "`path` is its file path in the run folder, `<chain_id>/step_NNN.png`."}
            )
        else:
            fields.append({"name": f.name, "dtype": f.dtype, "doc": f.doc})

    endpoint_steps_present = sorted({r["step"] for r in records} & set(ENDPOINT_STEPS))
    max_steps = sorted({max(v) for v in chains.values()})
    return {
        "n_rows": len(records),
        "n_step0": sum(r["step"] == 0 for r in records),
        "n_edited": sum(made_by.values()),
        "n_chains": len(chains),
        "n_sources": len({r["source_id"] for r in records}),
        "max_steps": max_steps,
        "editors": editors,
        "source_editors": [{"editor": e, "model": m, "rows": n} for (e, m), n in sorted(sources.items())],
        "simulated": simulated_rows > 0,
        "simulated_rows": simulated_rows,
        "all_simulated": simulated_rows > 0 and simulated_rows == sum(made_by.values()),
        "settings": settings,
        "configs": configs,
        "fields": fields,
        "endpoint_steps": list(ENDPOINT_STEPS),
        "endpoint_steps_present": endpoint_steps_present,
        "example_setting": settings[0]["name"],
        "shard_max": _human_bytes(shard_max_bytes),
        "row_group_rows": ROW_GROUP_ROWS,
        "citation": about.CITATION,
    }


# Licences the Hub knows by id (https://huggingface.co/docs/hub/repositories-licenses) that a
# builder is likely to give; anything else is stated in the card under `license: other`.
HUB_LICENCE_IDS = frozenset({
    "apache-2.0", "mit", "bsd-3-clause", "unlicense", "cc0-1.0", "pddl", "odc-by", "odbl", "cc-by-2.0",
    "cc-by-3.0", "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0",
    "cc-by-nd-4.0", "cc-by-nc-nd-4.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0", "other",
})
# Hub datasets whose licence this toolkit knows: images imported from them keep it.
KNOWN_DATASET_LICENCES = {about.ORIGINAL_DATASET: about.DATA_LICENCE}
_GEMINI_TERMS = "https://ai.google.dev/gemini-api/terms"


def _hub_licence_id(text: str) -> str | None:
    """`text` as a Hub licence id when it is one (`CC0-1.0` -> `cc0-1.0`), else None."""
    key = str(text).strip().lower().replace(" ", "-")
    return key if key in HUB_LICENCE_IDS else None


def read_source_licences(source: str | os.PathLike | dict | None) -> dict[str, str]:
    """{source_id: licence} from a dict or a YAML/JSON file (`coffee: CC0-1.0`, one line a source)."""
    if source is None:
        return {}
    if isinstance(source, dict):
        data = source
    else:
        import yaml

        path = Path(source)
        if not path.is_file():
            raise DatasetError(f"{path}: no such source-licences file (YAML: one `source_id: licence` per line)")
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise DatasetError(f"{path}: not valid YAML ({e})") from None
        if not isinstance(data, dict):
            raise DatasetError(f"{path}: expected a mapping `source_id: licence`, got {type(data).__name__}")
    return {str(k): str(v).strip() for k, v in data.items() if str(v).strip()}


def provenance(records: list[dict], licence: str | None = None, source_licences: dict[str, str] | None = None,
               source_datasets: list[str] | None = None) -> dict:
    """What the card says about where the images come from and under which licence.

    - Chains imported from a Hub release (`source_datasets`, e.g. kenantang/Banana100): the
      release's licence (CC BY-NC-SA 4.0 for the original Banana100).
    - Chains made here (simulated or gemini editor) from the builder's own source images: each
      image keeps its source image's licence (`source_licences`); the simulated editor adds no
      rights of its own. One Hub id when every source has the same one, else `other` with a table.
    - `licence` given by the builder overrides the Hub id (the prose still lists the sources).
    """
    source_licences = dict(source_licences or {})
    source_datasets = list(dict.fromkeys(source_datasets or []))
    sources = sorted({r["source_id"] for r in records})
    editors = {r["editor"] for r in records if r["step"] > 0}
    imported = "imported" in editors
    unknown_sources = [s for s in sources if s not in source_licences]
    notes = []
    known = [d for d in source_datasets if d in KNOWN_DATASET_LICENCES]
    if known:
        hub_id = KNOWN_DATASET_LICENCES[known[0]]
        why = (f"inherited from {', '.join(f'[{d}](https://huggingface.co/datasets/{d})' for d in known)}, "
               "the release these chains were imported from")
        if len({KNOWN_DATASET_LICENCES[d] for d in known}) > 1:
            hub_id, why = "other", "the releases these chains come from have different licences (see below)"
    elif source_datasets:
        hub_id, why = "other", (f"the licence of {', '.join(source_datasets)}, the release these chains come from "
                                "(not known to this toolkit: check it and rebuild with `--licence`)")
    elif sources and not unknown_sources:
        ids = {_hub_licence_id(source_licences[s]) for s in sources}
        texts = {source_licences[s] for s in sources}
        hub_id = ids.pop() if len(ids) == 1 and None not in ids else "other"
        why = ("the licence of every source image" if len(texts) == 1 else
               "each image keeps the licence of its chain's source image (table below)")
    else:
        hub_id = "other"
        why = (f"not recorded for {len(unknown_sources)} of the {len(sources)} source images "
               f"({', '.join(unknown_sources[:5])}{', ...' if len(unknown_sources) > 5 else ''}): each image keeps "
               "its source image's licence; rebuild with `--source-licences FILE` (or `--licence ID`) before "
               "publishing")
    if licence:
        hub_id = _hub_licence_id(licence) or "other"
        notes.append(f"The builder set the licence to **{licence}** (`--licence`).")
    if "simulated" in editors:
        notes.append("The `simulated` editor is code of this toolkit (Apache-2.0): its outputs are derived from "
                     "the source images and keep their licences; it adds no terms of its own.")
    if "gemini" in editors:
        notes.append(f"Images made by the `gemini` editor were generated with Google's Gemini API: its terms "
                     f"({_GEMINI_TERMS}) apply to their use, besides the source images' licences.")
    if imported and not source_datasets:
        notes.append("Some chains were imported (`banana100 import-chains`) without naming the release they come "
                     "from: rebuild with `--source-dataset HUB_ID` so that the card can state its licence.")
    return {
        "license": hub_id,
        "licence_why": why,
        "licence_notes": notes,
        "licence_given": licence,
        "source_datasets": source_datasets,
        "source_rows": [{"source_id": s, "licence": source_licences.get(s, "not recorded")} for s in sources],
        "licence_unknown": hub_id == "other" and not licence and (bool(unknown_sources) and not known),
    }


def write_card(folder: Path, items: list[_Item], stats: dict[str, _ConfigStats], features,
               shard_max_bytes: int = SHARD_MAX_BYTES, model_configs: dict[str, str] | None = None,
               provenance_facts: dict | None = None, repo_id: str | None = None) -> Path:
    """Write `folder/README.md`: YAML (licence, sources, configs, dataset_info, ...) and prose.

    `model_configs` maps each editor model id to its config name (`model_config`);
    `provenance_facts` is `provenance(...)` (default: nothing known about the sources);
    `repo_id` is the Hub id the card's loading lines use (`banana100 push` sets it on upload).
    """
    import datasets
    from huggingface_hub import DatasetCard, DatasetCardData

    model_configs = dict(model_configs or {})
    model_names = sorted(model_configs.values())
    settings = sorted(c for c in stats if c not in _RESERVED_CONFIGS and c not in model_names)
    config_files = {DEFAULT_CONFIG: f"{DATA_DIR}/*/*/*.parquet", ENDPOINTS_CONFIG: f"{ENDPOINTS_DIR}/*.parquet"}
    config_files.update({s: f"{DATA_DIR}/{s}/*/*.parquet" for s in settings})
    config_files.update({c: f"{DATA_DIR}/*/{model_slug(m)}/*.parquet" for m, c in model_configs.items()})
    order = [DEFAULT_CONFIG, *settings, *[c for c in model_names if c in stats],
             *([ENDPOINTS_CONFIG] if ENDPOINTS_CONFIG in stats else [])]
    yaml_configs = [
        {"config_name": name, "data_files": [{"split": SPLIT, "path": config_files[name]}]}
        | ({"default": True} if name == DEFAULT_CONFIG else {})
        for name in order
    ]
    n_rows = stats[DEFAULT_CONFIG].num_rows
    context = _card_context(items, {name: stats[name] for name in order}, shard_max_bytes, model_configs)
    facts = provenance_facts or provenance([it.record for it in items])
    context.update(facts, repo_id=repo_id or REPO_PLACEHOLDER, repo_known=bool(repo_id),
                   original_dataset=about.ORIGINAL_DATASET, toolkit_requirement=about.requirement())
    pretty_name = "Banana100 chains"
    if context["all_simulated"]:
        pretty_name += " (simulated editor)"
    elif context["simulated"]:
        pretty_name += " (partly simulated editor)"
    card_data = DatasetCardData(
        license=facts["license"],
        pretty_name=pretty_name,
        # every field but the image is written by the toolkit (manifest records), none by people
        annotations_creators=["machine-generated"],
        source_datasets=facts["source_datasets"] or ["original"],
        task_categories=["image-to-image"],
        tags=["image-quality-assessment", "no-reference-iqa", "nr-iqa", "iterative-editing", "image-editing",
              "degradation", "synthetic", "banana100"],
        size_categories=[_size_category(n_rows)],
        configs=yaml_configs,
    )
    from datasets.info import DatasetInfosDict

    infos = DatasetInfosDict()
    for name in order:
        st = stats[name]
        splits = datasets.SplitDict()
        splits.add(datasets.SplitInfo(name=SPLIT, num_bytes=st.num_bytes, num_examples=st.num_rows))
        infos[name] = datasets.DatasetInfo(
            features=features.copy(), splits=splits, download_size=st.download_size,
            dataset_size=st.num_bytes, config_name=name,
        )
    infos.to_dataset_card_data(card_data)

    template = resources.files("banana100.dataset").joinpath(CARD_TEMPLATE).read_text(encoding="utf-8")
    card = DatasetCard.from_template(card_data, template_str=template, **context)
    text = re.sub(r"\n{3,}", "\n\n", str(card)).rstrip("\n") + "\n"
    path = folder / CARD_NAME
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# The build


def _check_out_dir(out_dir: Path) -> None:
    from banana100.dataset.reader import is_dataset_dir

    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise DatasetError(f"{out_dir} exists and is not a folder; choose another --out")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not is_dataset_dir(out_dir):
        raise DatasetError(
            f"{out_dir} exists and is not a dataset folder from an earlier build; refusing to overwrite it "
            "(choose another --out or remove it)"
        )


def build_dataset(run_dirs: list[Path], out_dir: Path, shard_max_bytes: int = SHARD_MAX_BYTES,
                  num_proc: int | None = None, licence: str | None = None,
                  source_licences: str | os.PathLike | dict | None = None,
                  source_datasets: list[str] | None = None, repo_id: str | None = None) -> Path:
    """Build the Hub-ready dataset folder `out_dir` from run folders; return `out_dir`.

    Every image is checked before anything is written; the folder appears at `out_dir` only
    when complete (an earlier dataset build there is replaced; any other folder is refused).
    The work happens in `.<out_dir name>.building` next to it: an interrupted build (Ctrl-C,
    a crash, a full disk) is resumed by running the same command again, and every finished
    shard whose rows are unchanged is reused. `num_proc` > 1 checks images and writes the data
    folders (one per setting x editor model) in that many processes.

    The card states the licence and sources of the images (`provenance`): `source_datasets`
    names the Hub release imported chains come from (its licence applies), `source_licences`
    ({source_id: licence} or a YAML file) the licences of the builder's own source images,
    `licence` overrides the Hub licence id; `repo_id` is the Hub id of the card's loading lines.
    """
    import datasets  # noqa: F401 - fail early with a clear ImportError

    out_dir = Path(out_dir)
    run_dirs = [Path(p) for p in run_dirs]
    if shard_max_bytes < 64 * 1024:
        raise DatasetError(f"shard_max_bytes={shard_max_bytes} is too small (at least 64 KiB)")
    if num_proc is not None and num_proc < 1:
        raise DatasetError(f"num_proc={num_proc} must be at least 1")
    _check_out_dir(out_dir)
    for run_dir in run_dirs:
        if out_dir.resolve() == run_dir.resolve() or out_dir.resolve() in run_dir.resolve().parents:
            raise DatasetError(f"--out {out_dir} must not be a run folder or contain one ({run_dir})")

    licences = read_source_licences(source_licences)  # a bad file fails before the long part
    if repo_id is not None and (repo_id.count("/") != 1 or not all(repo_id.split("/"))):
        raise DatasetError(f"--repo-id {repo_id!r}: expected ORG/NAME")
    items = collect_items(run_dirs)
    models = chain_models(items)
    configs_of_models: dict[str, str] = {}
    for m in sorted(set(models.values())):
        name = model_config(m)
        if name in configs_of_models.values():
            other = next(k for k, v in configs_of_models.items() if v == name)
            raise DatasetError(f"editor models {other!r} and {m!r} both map to the config name {name!r}")
        configs_of_models[m] = name
    clash = {it.record["setting"] for it in items} & set(configs_of_models.values())
    if clash:
        raise DatasetError(f"setting names {sorted(clash)} clash with the per-model config names")
    # A fixed name, so that the next run finds and resumes an interrupted build.
    tmp = out_dir.parent / f".{out_dir.name}.building"
    checked = tmp / _CHECKED
    known = set(checked.read_text(encoding="utf-8").splitlines()) if checked.is_file() else set()
    verify_images(items, workers=num_proc, processes=bool(num_proc and num_proc > 1), already_checked=known)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(exist_ok=True)  # a plain mkdir (not mkdtemp, whose 0700 mode would stay) honours the umask
    (tmp / ".banana100-build").write_text("a banana100 build-dataset work folder; safe to delete\n")
    checked.write_text("".join(f"{k}\n" for k in map(_stat_key, items) if k), encoding="utf-8")

    groups: dict[tuple[str, str], list[_Item]] = defaultdict(list)
    for it in items:
        groups[(it.record["setting"], models[it.record["chain_id"]])].append(it)
    jobs = [(g, f"{DATA_DIR}/{s}/{model_slug(m)}") for (s, m), g in groups.items()]
    endpoint_items = [it for it in items if it.record["step"] in ENDPOINT_STEPS]
    if endpoint_items:  # else (no chain has any endpoint step) the config is left out
        jobs.append((endpoint_items, ENDPOINTS_DIR))
    # Leftovers of an earlier attempt on other data (a setting since removed...) go.
    wanted = {folder for _, folder in jobs}
    for d in (tmp / DATA_DIR).glob("*/*") if (tmp / DATA_DIR).is_dir() else []:
        if f"{DATA_DIR}/{d.parent.name}/{d.name}" not in wanted:
            shutil.rmtree(d)
    if ENDPOINTS_DIR not in wanted:
        shutil.rmtree(tmp / ENDPOINTS_DIR, ignore_errors=True)

    args = [(g, tmp / folder, shard_max_bytes, folder) for g, folder in jobs]
    if num_proc and num_proc > 1 and len(args) > 1:
        import multiprocessing

        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context()  # the platform's default, as `datasets` does for num_proc
        with ProcessPoolExecutor(min(num_proc, len(args)), mp_context=ctx) as pool:
            results = list(pool.map(_write_group, args))
    else:
        results = [_write_group(a) for a in args]

    stats: dict[str, _ConfigStats] = {DEFAULT_CONFIG: _ConfigStats()}
    for (_, folder), (rows, nbytes, sizes) in zip(jobs, results):
        _finalize_shards(tmp / folder)
        if folder == ENDPOINTS_DIR:
            names = [ENDPOINTS_CONFIG]
        else:
            _, setting, slug = folder.split("/")
            model = next(m for m in configs_of_models if model_slug(m) == slug)
            names = [DEFAULT_CONFIG, setting, configs_of_models[model]]
        for name in names:
            st = stats.setdefault(name, _ConfigStats())
            st.num_rows += rows
            st.num_bytes += nbytes
            st.download_size += sum(sizes)
            st.files += len(sizes)
    for journal in tmp.rglob(_JOURNAL):
        journal.unlink()
    checked.unlink()
    (tmp / ".banana100-build").unlink()
    facts = provenance([it.record for it in items], licence, licences, source_datasets)
    write_card(tmp, items, stats, dataset_features(), shard_max_bytes, model_configs=configs_of_models,
               provenance_facts=facts, repo_id=repo_id)
    _replace_dir(tmp, out_dir)
    return out_dir


def _replace_dir(new: Path, target: Path) -> None:
    """Move the finished folder `new` to `target`, replacing an earlier build there."""
    if not target.exists():
        os.replace(new, target)
        return
    _check_out_dir(target)  # again: it may have changed during the build
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.replace(target, old / target.name)
    try:
        os.replace(new, target)
    except BaseException:
        os.replace(old / target.name, target)  # put the earlier build back
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
