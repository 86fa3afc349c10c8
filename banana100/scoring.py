"""`banana100 score`: every image of a run or dataset folder x every metric -> one Parquet file.

Rows are written as they are computed, in small part files beside the output
(`<out>.parts/`), each renamed into place only when complete; the final file merges them.
Rerunning the same command skips every (chain, step, metric) already scored, so an
interrupted run loses at most one chunk. One image that cannot be scored (too small for a
metric, undecodable) gets a row with a NaN score and an `error` message; the others go on.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from .errors import Banana100Error, DatasetError, ManifestError
from .imageio import load_rgb
from .manifest import MANIFEST_NAME, image_path, read_manifest, write_file_atomic
from .registry import get_metric

# Identity and context of each scored image, copied from its manifest record.
RECORD_COLUMNS = ("chain_id", "source_id", "setting", "repeat", "step", "editor", "model", "sha256", "image",
                  "width", "height")
SCORES_SCHEMA = pa.schema(
    [
        ("chain_id", pa.string()), ("source_id", pa.string()), ("setting", pa.string()), ("repeat", pa.int32()),
        ("step", pa.int32()), ("editor", pa.string()), ("model", pa.string()), ("sha256", pa.string()),
        ("image", pa.string()), ("width", pa.int32()), ("height", pa.int32()),
        ("metric", pa.string()), ("score", pa.float64()), ("lower_better", pa.bool_()), ("error", pa.string()),
    ]
)


@dataclass
class ImageItem:
    """One image to score: its manifest fields and how to read its bytes."""

    record: dict
    name: str  # file path (run folder) or dataset path, for messages
    read: Callable[[], bytes]


def iter_items(source: Path) -> tuple[int, Iterator[ImageItem]]:
    """(number of images, iterator of images) of a run folder or a dataset folder."""
    source = Path(source)
    if (source / MANIFEST_NAME).is_file():
        records = read_manifest(source)
        missing = [str(image_path(source, r)) for r in records if not image_path(source, r).is_file()]
        if missing:
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            raise ManifestError(f"{source / MANIFEST_NAME} lists images that are not on disk: {', '.join(missing[:5])}{more}")

        def run_items():
            for r in records:
                path = image_path(source, r)
                yield ImageItem(r, str(path), path.read_bytes)

        return len(records), run_items()

    from .dataset_io import count_dataset_rows, is_dataset_dir, iter_dataset_records

    if is_dataset_dir(source):
        def dataset_items():
            for record, data in iter_dataset_records(source):
                yield ImageItem(record, f"{source}:{record.get('image') or record['chain_id']}/step {record['step']}",
                                lambda data=data: data)

        return count_dataset_rows(source), dataset_items()
    if not source.exists():
        raise Banana100Error(f"{source}: no such folder")
    raise DatasetError(f"{source} is neither a run folder (no {MANIFEST_NAME}) nor a dataset folder (no README.md with configs)")


def _parts_dir(out: Path) -> Path:
    return out.with_name(out.name + ".parts")


def read_scores(out: Path) -> pa.Table:
    """Everything scored so far: the merged file plus any part files of an unfinished run."""
    tables = []
    if out.is_file():
        tables.append(pq.read_table(out))
    parts = _parts_dir(out)
    if parts.is_dir():
        tables += [pq.read_table(p) for p in sorted(parts.glob("part-*.parquet"))]
    if not tables:
        return SCORES_SCHEMA.empty_table()
    return pa.concat_tables([t.select(SCORES_SCHEMA.names).cast(SCORES_SCHEMA) for t in tables])


def _done_keys(table: pa.Table) -> set[tuple[str, int, str]]:
    cols = table.select(["chain_id", "step", "metric"]).to_pydict()
    return set(zip(cols["chain_id"], cols["step"], cols["metric"]))


def _write_part(parts: Path, rows: list[dict]) -> None:
    parts.mkdir(parents=True, exist_ok=True)
    index = len(list(parts.glob("part-*.parquet")))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCORES_SCHEMA), sink)
    write_file_atomic(parts / f"part-{index:06d}.parquet", sink.getvalue().to_pybytes())


def _merge(out: Path) -> None:
    table = read_scores(out).sort_by([("metric", "ascending"), ("chain_id", "ascending"), ("step", "ascending")])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_file_atomic(out, sink.getvalue().to_pybytes())
    shutil.rmtree(_parts_dir(out), ignore_errors=True)


def _score_chunk(chunk: list[tuple[ImageItem, list[str]]], scorers: dict) -> list[dict]:
    """Decode each image once, then score it with every metric it still needs."""
    rows = []
    arrays: list[np.ndarray | None] = []
    decode_errors: list[str | None] = []
    for item, _ in chunk:
        try:
            arrays.append(load_rgb(item.read()))
            decode_errors.append(None)
        except (Banana100Error, OSError) as e:
            arrays.append(None)
            decode_errors.append(f"{item.name}: {e}")

    for metric, scorer in scorers.items():
        spec = scorer.spec
        todo = [i for i, (_, needed) in enumerate(chunk) if metric in needed]
        errors: dict[int, str] = {}
        ok = []
        for i in todo:
            if arrays[i] is None:
                errors[i] = decode_errors[i]
            elif min(arrays[i].shape[:2]) < spec.min_size:
                h, w = arrays[i].shape[:2]
                errors[i] = f"{spec.display_name} needs at least {spec.min_size}x{spec.min_size} pixels; {chunk[i][0].name} is {w}x{h}"
            else:
                ok.append(i)
        scores: dict[int, float] = {}
        try:
            scores.update(zip(ok, scorer.score_arrays([arrays[i] for i in ok])))
        except Banana100Error:
            for i in ok:  # isolate the image that failed
                try:
                    scores[i] = scorer.score_arrays([arrays[i]])[0]
                except Banana100Error as e:
                    errors[i] = f"{chunk[i][0].name}: {e}"
        for i in todo:
            record = chunk[i][0].record
            rows.append({
                **{c: record.get(c) for c in RECORD_COLUMNS},
                "metric": metric,
                "score": scores.get(i, float("nan")),
                "lower_better": spec.lower_better,
                "error": errors.get(i),
            })
    return rows


def build_scorers(metrics: list[str], device: str | None = None, batch_size: int = 8) -> dict:
    """Load every metric before any work, so a missing parameter file stops the run at once."""
    from .engine import MetricScorer

    for m in metrics:
        get_metric(m)
    return {m: MetricScorer(m, device=device, batch_size=batch_size) for m in metrics}


def score_to_parquet(
    source: str | os.PathLike,
    metrics: list[str],
    out: str | os.PathLike,
    device: str | None = None,
    batch_size: int = 8,
    chunk_size: int = 32,
    progress: bool = True,
) -> Path:
    """Score every image of `source` with `metrics` into `out`; resumes where a previous run stopped."""
    out = Path(out)
    if out.suffix != ".parquet":
        raise Banana100Error(f"{out}: the scores file must end in .parquet")
    out.parent.mkdir(parents=True, exist_ok=True)
    total, items = iter_items(Path(source))
    scorers = build_scorers(metrics, device=device, batch_size=batch_size)
    done = _done_keys(read_scores(out))
    parts = _parts_dir(out)

    n_errors = 0
    chunk: list[tuple[ImageItem, list[str]]] = []
    bar = tqdm(total=total, unit="img", desc="scoring", disable=not progress, file=sys.stderr)

    def flush():
        nonlocal n_errors
        if chunk:
            rows = _score_chunk(chunk, scorers)
            n_errors += sum(r["error"] is not None for r in rows)
            _write_part(parts, rows)
            bar.update(len(chunk))
            chunk.clear()

    try:
        for item in items:
            needed = [m for m in metrics if (item.record["chain_id"], item.record["step"], m) not in done]
            if not needed:
                bar.update(1)
                continue
            chunk.append((item, needed))
            if len(chunk) >= chunk_size:
                flush()
        flush()
    finally:
        bar.close()
    _merge(out)
    if n_errors:
        warnings.warn(f"{n_errors} (image, metric) pairs could not be scored; see the `error` column of {out}",
                      stacklevel=2)
    return out
