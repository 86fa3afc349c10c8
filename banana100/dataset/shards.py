"""Writing the dataset's Parquet shards: streaming, sized as the Hub recommends, resumable.

    write_shards(items, folder, dataset_features(), SHARD_MAX_BYTES, "replicate")
    finalize_shards(folder)  # .part-00000.parquet, ... -> train-00000-of-00002.parquet, ...

Parquet files are written the way `datasets` writes them (`push_to_hub`): the features' Arrow
schema with its `huggingface` metadata, image bytes stored uncompressed and PLAIN-encoded, page
index, content-defined chunking; row groups of at most 100 rows and about 100 MB, shards of at
most 500 MB (the Hub's recommendation). Writing streams: at most one row group of image bytes is
held in memory (per process). The layout was chosen by measurement against raw files and
WebDataset shards: bench/dataset/dataset_layout.py, BENCHMARKS.md ("Dataset layout").

Each finished shard is journalled (`JOURNAL_NAME` in its folder) with a key of its rows
(records, hence image hashes); writing the same rows into the folder again, after an
interruption, reuses the finished shards whose rows are unchanged.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from banana100.chains.manifest import sha256_bytes
from banana100.dataset.checks import Item, progress
from banana100.dataset.layout import IMAGE_COLUMN, SPLIT, dataset_features
from banana100.errors import DatasetError, DiskWriteError
from banana100.schema import RECORD_FIELDS

#: Rows per row group: `datasets` and the dataset viewer use ~100 for image datasets, so that
#: reading one row (random access, the viewer) reads at most 100 images.
ROW_GROUP_ROWS = 100
#: ...and a row group is also closed at about this size (`datasets.config.MAX_ROW_GROUP_SIZE`),
#: which bounds the memory a writer or a reader needs for large images.
ROW_GROUP_MAX_BYTES = 100 * 1024**2
#: The journal of a data folder's finished shards (deleted when the whole build is done).
JOURNAL_NAME = ".shards.jsonl"
_NO_STATISTICS = ("prompt", "thought_summary", "generation_config", "editor_info", "finish_reason")
#: Bump when the bytes written for the same rows change (writer options, schema): an interrupted
#: build's shards are then rewritten instead of reused.
_SHARD_FORMAT = 1
_FINAL_NAME = re.compile(rf"^{SPLIT}-(\d{{5}})-of-\d{{5}}\.parquet$")


_NO_ROOM = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
            errno.EFBIG: "file too large (over a file size limit: `ulimit -f`, or the file system's)"}


def write_error(e: OSError, path: Path) -> OSError:
    """`e`, raised while writing `path`, as one line naming it: pyarrow's write errors and a
    file's flush at close name no file. A full disk (or quota, or size limit) says so and that
    the finished shards are kept; other errors keep their own text."""
    if isinstance(e, DiskWriteError) or e.filename is not None:
        return e
    if e.errno in _NO_ROOM:
        return DiskWriteError(f"cannot write {path}: {_NO_ROOM[e.errno]}; make room and run the same command "
                              "again: the finished shards are kept")
    text = e.strerror or str(e)
    return OSError(e.errno, f"cannot write {path}: {text}") if e.errno else OSError(f"cannot write {path}: {text}")


def _parquet_writer_options(features, schema: pa.Schema) -> dict:
    """The ParquetWriter options `datasets` itself uses (datasets.arrow_writer.ParquetWriter)."""
    try:
        from datasets.arrow_writer import get_parquet_column_options

        options = dict(get_parquet_column_options(features, schema))
    except ImportError:  # older datasets: same policy, written out
        options = {
            "compression": {
                **{f.name: "snappy" for f in schema if f.name != IMAGE_COLUMN},
                f"{IMAGE_COLUMN}.bytes": "none",
                f"{IMAGE_COLUMN}.path": "none",
            },
            "use_dictionary": [f.name for f in schema if f.name != IMAGE_COLUMN],
            "column_encoding": {f"{IMAGE_COLUMN}.bytes": "PLAIN", f"{IMAGE_COLUMN}.path": "PLAIN"},
        }
    options["write_page_index"] = True
    # Statistics (min/max in the footer and the page index) only where they help filtering:
    # not for image bytes (up to 4 KiB per page and row group, for nothing) nor free text.
    options["write_statistics"] = [
        f.name for f in RECORD_FIELDS if f.name != IMAGE_COLUMN and f.name not in _NO_STATISTICS
    ]
    try:
        from datasets.config import DEFAULT_CDC_OPTIONS

        options["use_content_defined_chunking"] = dict(DEFAULT_CDC_OPTIONS)
    except ImportError:
        pass
    return options


class _KeptErrorsFile:
    """The file a Parquet writer writes into, keeping a write error instead of raising it into Arrow:
    Arrow's column writer aborts the whole process on a failed write in some places (rc 134, "Check
    failed: _s.ok() ... [errno 28] No space left on device", seen on a full 7 MB tmpfs). `_ShardWriter`
    raises the kept error after each call into the writer, naming the file (`write_error`)."""

    def __init__(self, path: Path):
        self.path = path
        self.error: OSError | None = None
        self._file = open(path, "wb")
        self._position = 0
        self.closed = False

    def write(self, data) -> int:
        n = memoryview(data).nbytes
        if self.error is None:
            try:
                self._file.write(data)
            except OSError as e:
                self.error = e
        self._position += n
        return n

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        if self.error is None:
            try:
                self._file.flush()
            except OSError as e:
                self.error = e

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self._file.close()
            except OSError as e:
                self.error = self.error or e

    def raise_kept(self) -> None:
        if self.error is not None:
            raise write_error(self.error, self.path)


def open_sink(path: Path) -> tuple[_KeptErrorsFile, pa.NativeFile]:
    """The file a shard is written to, and the Arrow stream over it that the Parquet writer writes into
    (its cost against Arrow's own file: bench/dataset/shard_sink_cost.py)."""
    kept = _KeptErrorsFile(path)
    return kept, pa.PythonFile(kept, mode="w")


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
        self.schema = features.arrow_schema
        self.options = _parquet_writer_options(features, self.schema)
        self.max_bytes = max_bytes
        self.parts: list[Path] = []
        self.num_rows = 0
        self.num_bytes = 0  # Arrow (in-memory) bytes, as datasets reports them
        self._pending: list[dict] = []
        self._pending_bytes = 0
        self._sink = None
        self._file: _KeptErrorsFile | None = None
        self._writer = None
        self._shard_rows = 0
        self._shard_groups = 0
        self._shard_bytes = 0
        self._shard_key = hashlib.sha256()
        self.journal: Path | None = None  # finished shards are recorded here (resumable builds)

    def adopt(self, part: Path, rows: int, num_bytes: int) -> None:
        """Take over a finished shard of an interrupted build (see `write_shards`)."""
        self.parts.append(part)
        self.num_rows += rows
        self.num_bytes += num_bytes

    def _row_bytes(self, row: dict) -> int:
        extra = sum(len(v) for k, v in row.items() if isinstance(v, str) and k != IMAGE_COLUMN)
        return len(row[IMAGE_COLUMN]["bytes"]) + len(row[IMAGE_COLUMN]["path"]) + extra + self._ROW_OVERHEAD

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
            self._file, self._sink = open_sink(path)
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
        self._file.raise_kept()
        self.num_rows += table.num_rows
        self.num_bytes += table.nbytes
        self._shard_bytes += table.nbytes
        self._shard_rows += table.num_rows
        self._shard_groups += 1
        self._pending = []
        self._pending_bytes = 0

    def _close_shard(self, record: bool = True) -> None:
        if self._writer is not None:
            writer, sink, self._writer, self._sink = self._writer, self._sink, None, None
            try:
                writer.close()
            finally:  # the file is closed even when its footer cannot be written (a full disk)
                sink.close()
                self._file.close()
            self._file.raise_kept()
            part = self.parts[-1]
            if record and self.journal is not None:
                with open(part, "rb") as f:
                    os.fsync(f.fileno())
                entry = {"part": part.name, "rows": self._shard_rows, "num_bytes": self._shard_bytes,
                         "size": part.stat().st_size, "key": self._shard_key.hexdigest(),
                         "max_bytes": self.max_bytes, "format": _SHARD_FORMAT}
                try:
                    with open(self.journal, "a", encoding="utf-8") as f:
                        f.write(json.dumps(entry) + "\n")
                        f.flush()
                        os.fsync(f.fileno())
                except OSError as e:
                    raise write_error(e, self.journal) from None
        self._writer = self._sink = None
        self._shard_rows = self._shard_groups = self._shard_bytes = 0
        self._shard_key = hashlib.sha256()

    def close(self) -> None:
        """Finish the last shard (its final `train-i-of-n` name comes from `finalize_shards`)."""
        self._flush()
        self._close_shard()

    def abort(self) -> None:
        with contextlib.suppress(Exception):  # already failing: keep the first error
            self._close_shard(record=False)


def item_row(item: Item) -> dict:
    """The dataset row of one item, with its image bytes (re-checked against the manifest)."""
    data = item.path.read_bytes()
    if sha256_bytes(data) != item.record["sha256"]:
        raise DatasetError(f"{item.path}: changed on disk while the dataset was being built ({item.where})")
    row = {f.name: item.record.get(f.name) for f in RECORD_FIELDS}
    row[IMAGE_COLUMN] = {"bytes": data, "path": Path(item.record["image"]).as_posix()}
    return row


def _row_key(item: Item) -> bytes:
    """What a shard's content is keyed by: the full record (its `sha256` pins the image bytes)."""
    return json.dumps(item.record, sort_keys=True, ensure_ascii=False).encode() + b"\n"


def _shard_key(items: list[Item]) -> str:
    h = hashlib.sha256()
    for it in items:
        h.update(_row_key(it))
    return h.hexdigest()


def _resume(folder: Path, items: list[Item], writer: _ShardWriter) -> int:
    """Adopt the finished shards an interrupted build left in `folder`; return the rows they hold.

    A shard is reused only when its journal entry matches: same position, same file size, same
    writer format and shard limit, and the same rows (records, hence image hashes) in the same
    order. Everything after the first mismatch, and any half-written shard, is deleted.
    """
    journal = folder / JOURNAL_NAME
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
        if f.name != JOURNAL_NAME and f.name not in keep:
            if f.is_dir():
                shutil.rmtree(f)
            else:
                f.unlink()
    try:
        journal.write_text("".join(json.dumps(e) + "\n" for e in kept), encoding="utf-8")
    except OSError as e:
        raise write_error(e, journal) from None
    return pos


def write_shards(items: list[Item], folder: Path, features, max_bytes: int, desc: str) -> _ShardWriter:
    """Write `items` as Parquet shards into `folder`, reusing the finished shards of an earlier,
    interrupted attempt (keyed by their content, see `_resume`)."""
    writer = _ShardWriter(folder, features, max_bytes)
    done = _resume(folder, items, writer)
    folder.mkdir(parents=True, exist_ok=True)
    writer.journal = folder / JOURNAL_NAME
    try:
        for it in progress(items[done:], len(items) - done, f"writing {desc}"):
            writer.add(item_row(it), _row_key(it))
        writer.close()
    except OSError as e:
        writer.abort()
        # pyarrow's write errors name no file: a full disk, say where
        raise write_error(e, writer.parts[-1] if writer.parts else folder) from None
    except BaseException:
        writer.abort()
        raise
    return writer


def finalize_shards(folder: Path) -> list[Path]:
    """Give a finished folder's shards their `train-i-of-n` names."""
    parts = sorted(folder.glob(".part-*.parquet"))
    n = len(parts)
    final = []
    for i, part in enumerate(parts):
        target = part.with_name(f"{SPLIT}-{i:05d}-of-{n:05d}.parquet")
        os.replace(part, target)
        final.append(target)
    return final  # the journal stays until the whole build is done (`build_dataset` deletes it)


def write_group(args) -> tuple[int, int, list[int]]:
    """One data folder (a worker's job with --num-proc): (rows, Arrow bytes, shard sizes)."""
    items, folder, max_bytes, desc = args
    writer = write_shards(items, folder, dataset_features(), max_bytes, desc)
    return writer.num_rows, writer.num_bytes, [p.stat().st_size for p in writer.parts]
