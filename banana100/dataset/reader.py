"""Reading a Banana100 dataset folder (as written by `dataset_script/build.py`) without `datasets`.

The scoring engine reads images as encoded bytes and decodes them itself, in parallel; going
through `datasets.load_dataset` would first copy every image into its Arrow cache. These
helpers read the folder's Parquet files directly, a few rows at a time, so memory stays
flat however large the dataset:

    for record, image_bytes in iter_dataset_records("banana100-dataset", config="endpoints"):
        ...  # record: every schema field except `image`; image_bytes: the original file bytes

The files of a config are the ones its YAML `configs` entry in the card (`README.md`) names
(`card_configs`, `config_patterns`, `dataset_files`). Rows are read in order
(`iter_dataset_records`, `iter_file_batches`) or, for one chain at a time, through an index of
row groups (`index_rows`, `row_group_images`; on any fsspec filesystem, the Hub's too). This
module is the one place that reads the card and the Parquet files: `verify`,
`banana100.scoring` and `banana100.explore` use it.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from banana100.dataset.layout import CARD_NAME, DEFAULT_CONFIG, IMAGE_COLUMN, RECORD_COLUMNS
from banana100.errors import DatasetError
from banana100.schema import REQUIRED_FIELDS

#: Rows read at a time: a small batch of images in memory, never a whole row group.
BATCH_ROWS = 16
_READ_BUFFER = 1 << 20


def _card_data(dataset_dir: Path) -> dict | None:
    """The YAML header of the folder's card, or None when there is no card we can read."""
    readme = dataset_dir / CARD_NAME
    if not readme.is_file():
        return None
    try:
        from huggingface_hub import DatasetCard

        data = DatasetCard.load(readme).data
    except Exception:  # noqa: BLE001 - not a card we can read: not a dataset folder
        return None
    return data.to_dict() if data is not None else {}


def card_configs(dataset_dir: str | os.PathLike) -> list[dict] | None:
    """The YAML `configs` list of the folder's card, or None when there is no usable card."""
    data = _card_data(Path(dataset_dir))
    configs = data.get("configs") if data is not None else None
    if not isinstance(configs, list) or not all(isinstance(c, dict) and "config_name" in c for c in configs):
        return None
    return configs


def card_row_counts(dataset_dir: str | os.PathLike) -> dict[str, int]:
    """{config: rows} as the card's `dataset_info` states them (configs it does not list are left out)."""
    infos = (_card_data(Path(dataset_dir)) or {}).get("dataset_info") or []
    if isinstance(infos, dict):
        infos = [infos]
    out = {}
    for info in infos:
        splits = info.get("splits") or []
        out[info.get("config_name", DEFAULT_CONFIG)] = sum(s.get("num_examples", 0) for s in splits)
    return out


def config_patterns(configs: list[dict], config: str, where: str) -> list[str]:
    """The path patterns of one config's `data_files` (a string, a list, or split dicts), each
    relative to the dataset's root. Raises DatasetError, naming `where` (the folder or Hub id),
    for a config the card does not list or a pattern that leaves the dataset."""
    by_name = {c["config_name"]: c for c in configs}
    if config not in by_name:
        raise DatasetError(f"{where}: no config {config!r}; the card lists {', '.join(by_name)}")
    data_files = by_name[config].get("data_files")
    patterns: list[str] = []
    for entry in [data_files] if isinstance(data_files, str) else data_files or []:
        if isinstance(entry, str):
            patterns.append(entry)
        elif isinstance(entry, dict):
            paths = entry.get("path")
            patterns.extend([paths] if isinstance(paths, str) else list(paths or []))
    for pattern in patterns:
        if os.path.isabs(pattern) or ".." in Path(pattern).parts:
            raise DatasetError(f"{where}: data_files pattern {pattern!r} leaves the dataset")
    return patterns


def _config_files(dataset_dir: Path, configs: list[dict], config: str) -> list[Path]:
    files: set[Path] = set()
    for pattern in config_patterns(configs, config, str(dataset_dir)):
        for match in glob.glob(str(dataset_dir / pattern), recursive=True):
            if match.endswith(".parquet") and os.path.isfile(match):
                files.add(Path(match))
    return sorted(files)


def is_dataset_dir(path: str | os.PathLike) -> bool:
    """True for a dataset folder: a card with YAML `configs` and Parquet data files."""
    path = Path(path)
    if not path.is_dir():
        return False
    configs = card_configs(path)
    if not configs:
        return False
    try:
        return any(_config_files(path, configs, c["config_name"]) for c in configs)
    except DatasetError:
        return False


def dataset_files(dataset_dir: str | os.PathLike, config: str = DEFAULT_CONFIG) -> list[Path]:
    """The Parquet files of one config of a dataset folder, sorted."""
    dataset_dir = Path(dataset_dir)
    configs = card_configs(dataset_dir)
    if configs is None:
        raise DatasetError(
            f"{dataset_dir} is not a dataset folder (no {CARD_NAME} with YAML `configs`); "
            "build one with `banana100 build-dataset`"
        )
    files = _config_files(dataset_dir, configs, config)
    if not files:
        raise DatasetError(f"{dataset_dir}: config {config!r} has no Parquet files")
    return files


def footer_rows(path: Path) -> int:
    """Number of rows of one Parquet file, from its footer (reads no data)."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for bad files
        raise DatasetError(f"{path}: not a readable Parquet file ({e})") from None


def count_dataset_rows(dataset_dir: str | os.PathLike, config: str = DEFAULT_CONFIG) -> int:
    """Number of rows of a config, from the Parquet footers (reads no data)."""
    return sum(footer_rows(f) for f in dataset_files(dataset_dir, config))


def _absent_columns(name, names, wanted: Sequence[str]) -> list[str]:
    """The `wanted` columns a Parquet file lacks. Optional record fields added since the file was
    written (chat_mode, variant) are read as null; a missing required one is an error naming it."""
    absent = [c for c in wanted if c not in names]
    missing = [c for c in absent if c in REQUIRED_FIELDS or c == IMAGE_COLUMN]
    if missing:
        raise DatasetError(f"{name}: missing columns {missing}; was it written by `banana100 build-dataset`?")
    return absent


def iter_file_batches(path: Path, columns: Sequence[str] = RECORD_COLUMNS, with_images: bool = True,
                      batch_size: int = BATCH_ROWS) -> Iterator[tuple[int, list[dict], object]]:
    """Yield `(first row, records, images)` for each batch of `batch_size` rows of one Parquet file.

    `records` holds one dict of `columns` per row (None where a field is null); `images` is the
    batch's image bytes as an Arrow array (`images[j].as_py()`: row j's original file bytes, or
    None), so that a row's bytes are copied out only when used; None when not `with_images`.
    Raises DatasetError naming the file when it is not a readable Parquet file with these columns.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = [*columns, *([IMAGE_COLUMN] if with_images else [])]
    try:
        # No pre-buffering, small read buffer: pages are read as decoded, so memory holds one
        # small batch of images, not a whole row group (three times over).
        pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=_READ_BUFFER)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for bad files
        raise DatasetError(f"{path}: not a readable Parquet file ({e})") from None
    absent = _absent_columns(path, pf.schema_arrow.names, wanted)
    row = 0
    batches = pf.iter_batches(batch_size=batch_size, columns=[c for c in wanted if c not in absent])
    while True:
        try:
            batch = next(batches, None)
        except (pa.ArrowException, OSError) as e:
            raise DatasetError(f"{path}: cannot read rows {row} and on ({e})") from None
        if batch is None:
            return
        meta = {c: [None] * batch.num_rows if c in absent else batch.column(c).to_pylist() for c in columns}
        records = [{c: meta[c][j] for c in columns} for j in range(batch.num_rows)]
        images = batch.column(IMAGE_COLUMN).field("bytes") if with_images else None
        del batch, meta
        yield row, records, images
        row += len(records)


def index_rows(files: Sequence[str], columns: Sequence[str], fs) -> Iterator[tuple[int, int, int, dict]]:
    """Yield `(file index, row group, row in the group, record of columns)` for every row of the
    Parquet `files` on the fsspec filesystem `fs` (local, or the Hub's), reading only `columns`,
    once per file: the index that random access to images (`row_group_images`) goes by."""
    import pyarrow.parquet as pq

    for fi, name in enumerate(files):
        with fs.open(name, "rb") as f:
            pf = pq.ParquetFile(f)
            absent = _absent_columns(name, pf.schema_arrow.names, columns)
            cols = pf.read(columns=[c for c in columns if c not in absent]).to_pydict()
            cols.update({c: [None] * pf.metadata.num_rows for c in absent})
            sizes = [pf.metadata.row_group(g).num_rows for g in range(pf.metadata.num_row_groups)]
        row = 0
        for g, n in enumerate(sizes):
            for j in range(n):
                yield fi, g, j, {c: cols[c][row + j] for c in columns}
            row += n


def row_group_images(path: str, row_group: int, fs):
    """The image bytes of one row group of a Parquet file on `fs`, as an Arrow array
    (`images[j].as_py()`: the bytes of the group's row j, or None)."""
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as f:
        column = pq.ParquetFile(f).read_row_group(row_group, columns=[IMAGE_COLUMN]).column(IMAGE_COLUMN)
    return column.combine_chunks().field("bytes")


def iter_dataset_records(
    dataset_dir: str | os.PathLike, config: str = DEFAULT_CONFIG, batch_size: int = BATCH_ROWS
) -> Iterator[tuple[dict, bytes]]:
    """Yield `(record, image_bytes)` for every row of one config, in file order.

    `record` holds every schema field except `image` (None where a field is null);
    `image_bytes` are the image file's original bytes. Reads `batch_size` rows at a time
    (never more than one row group, at most ~100 images), so memory does not grow with the
    dataset.
    """
    for path in dataset_files(dataset_dir, config):
        for row, records, images in iter_file_batches(path, batch_size=batch_size):
            for j, record in enumerate(records):
                data = images[j].as_py()
                if data is None:
                    raise DatasetError(f"{path}: row {row + j} has no image bytes")
                yield record, data
