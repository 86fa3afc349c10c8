"""Reading a Banana100 dataset folder (as written by `dataset_script/build.py`) without `datasets`.

The scoring engine reads images as encoded bytes and decodes them itself, in parallel; going
through `datasets.load_dataset` would first copy every image into its Arrow cache. These
helpers read the folder's Parquet files directly, a few rows at a time, so memory stays
flat however large the dataset:

    for record, image_bytes in iter_dataset_records("banana100-dataset", config="endpoints"):
        ...  # record: every schema field except `image`; image_bytes: the original file bytes

The files of a config are the ones its YAML `configs` entry in the card (`README.md`) names.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from pathlib import Path

from banana100.errors import DatasetError
from banana100.schema import RECORD_FIELDS

CARD_NAME = "README.md"
IMAGE_COLUMN = "image"
RECORD_COLUMNS = tuple(f.name for f in RECORD_FIELDS if f.name != IMAGE_COLUMN)
_READ_BUFFER = 1 << 20


def _card_configs(dataset_dir: Path) -> list[dict] | None:
    """The YAML `configs` list of the folder's card, or None when there is no usable card."""
    readme = dataset_dir / CARD_NAME
    if not readme.is_file():
        return None
    try:
        from huggingface_hub import DatasetCard

        data = DatasetCard.load(readme).data
    except Exception:  # noqa: BLE001 - not a card we can read: not a dataset folder
        return None
    configs = data.get("configs") if data is not None else None
    if not isinstance(configs, list) or not all(isinstance(c, dict) and "config_name" in c for c in configs):
        return None
    return configs


def is_dataset_dir(path: str | os.PathLike) -> bool:
    """True for a dataset folder: a card with YAML `configs` and Parquet data files."""
    path = Path(path)
    if not path.is_dir():
        return False
    configs = _card_configs(path)
    if not configs:
        return False
    try:
        return any(_config_files(path, configs, c["config_name"]) for c in configs)
    except DatasetError:
        return False


def _patterns(data_files) -> list[str]:
    """The train-split path patterns of a `data_files` YAML value (string, list, or split dicts)."""
    if isinstance(data_files, str):
        return [data_files]
    patterns: list[str] = []
    for entry in data_files or []:
        if isinstance(entry, str):
            patterns.append(entry)
        elif isinstance(entry, dict):
            paths = entry.get("path")
            patterns.extend([paths] if isinstance(paths, str) else list(paths or []))
    return patterns


def _config_files(dataset_dir: Path, configs: list[dict], config: str) -> list[Path]:
    by_name = {c["config_name"]: c for c in configs}
    if config not in by_name:
        raise DatasetError(f"{dataset_dir}: no config {config!r}; the card lists {', '.join(by_name)}")
    files: set[Path] = set()
    for pattern in _patterns(by_name[config].get("data_files")):
        if os.path.isabs(pattern) or ".." in Path(pattern).parts:
            raise DatasetError(f"{dataset_dir / CARD_NAME}: data_files pattern {pattern!r} leaves the folder")
        for match in glob.glob(str(dataset_dir / pattern), recursive=True):
            if match.endswith(".parquet") and os.path.isfile(match):
                files.add(Path(match))
    return sorted(files)


def dataset_files(dataset_dir: str | os.PathLike, config: str = "default") -> list[Path]:
    """The Parquet files of one config of a dataset folder, sorted."""
    dataset_dir = Path(dataset_dir)
    configs = _card_configs(dataset_dir)
    if configs is None:
        raise DatasetError(
            f"{dataset_dir} is not a dataset folder (no {CARD_NAME} with YAML `configs`); "
            "build one with `banana100 build-dataset`"
        )
    files = _config_files(dataset_dir, configs, config)
    if not files:
        raise DatasetError(f"{dataset_dir}: config {config!r} has no Parquet files")
    return files


def count_dataset_rows(dataset_dir: str | os.PathLike, config: str = "default") -> int:
    """Number of rows of a config, from the Parquet footers (reads no data)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in dataset_files(dataset_dir, config))


def iter_dataset_records(
    dataset_dir: str | os.PathLike, config: str = "default", batch_size: int = 16
) -> Iterator[tuple[dict, bytes]]:
    """Yield `(record, image_bytes)` for every row of one config, in file order.

    `record` holds every schema field except `image` (None where a field is null);
    `image_bytes` are the image file's original bytes. Reads `batch_size` rows at a time
    (never more than one row group, at most ~100 images), so memory does not grow with the
    dataset.
    """
    import pyarrow.parquet as pq

    for path in dataset_files(dataset_dir, config):
        try:
            # No pre-buffering, small read buffer: pages are read as decoded, so memory holds one
            # small batch of images, not a whole row group (three times over).
            pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=_READ_BUFFER)
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for bad files
            raise DatasetError(f"{path}: not a readable Parquet file ({e})") from None
        names = set(pf.schema_arrow.names)
        missing = [c for c in (*RECORD_COLUMNS, IMAGE_COLUMN) if c not in names]
        if missing:
            raise DatasetError(f"{path}: missing columns {missing}; was it written by `banana100 build-dataset`?")
        row = 0
        for batch in pf.iter_batches(batch_size=batch_size, columns=[*RECORD_COLUMNS, IMAGE_COLUMN]):
            meta = {c: batch.column(c).to_pylist() for c in RECORD_COLUMNS}
            images = batch.column(IMAGE_COLUMN).field("bytes")
            for j in range(batch.num_rows):
                data = images[j].as_py()
                if data is None:
                    raise DatasetError(f"{path}: row {row + j} has no image bytes")
                yield {c: meta[c][j] for c in RECORD_COLUMNS}, data
            row += batch.num_rows
            del batch, meta, images
