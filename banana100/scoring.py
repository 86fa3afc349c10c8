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


def _write_part(parts: Path, rows: list[dict], prefix: str = "part-") -> None:
    """Write one part file; each process of a distributed run has its own `prefix` (no clashes)."""
    parts.mkdir(parents=True, exist_ok=True)
    index = len(list(parts.glob(f"{prefix}*.parquet")))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCORES_SCHEMA), sink)
    write_file_atomic(parts / f"{prefix}{index:06d}.parquet", sink.getvalue().to_pybytes())


def _merge(out: Path) -> None:
    table = read_scores(out).sort_by([("metric", "ascending"), ("chain_id", "ascending"), ("step", "ascending")])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_file_atomic(out, sink.getvalue().to_pybytes())
    shutil.rmtree(_parts_dir(out), ignore_errors=True)


def _score_chunk(chunk: list[tuple[ImageItem, list[str]]], scorers: dict, decode_pool=None) -> list[dict]:
    """Decode each image once, then score it with every metric it still needs."""
    rows = []

    def decode(item: ImageItem) -> tuple[np.ndarray | None, str | None]:
        try:
            return load_rgb(item.read()), None
        except (Banana100Error, OSError) as e:
            return None, f"{item.name}: {e}"

    if decode_pool is not None:  # PIL decoding releases the GIL: threads decode in parallel
        decoded = list(decode_pool.map(decode, [item for item, _ in chunk]))
    else:
        decoded = [decode(item) for item, _ in chunk]
    arrays = [a for a, _ in decoded]
    decode_errors = [e for _, e in decoded]

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
        except Exception:  # noqa: BLE001 - isolate the image that failed; the others go on
            for i in ok:
                try:
                    scores[i] = scorer.score_arrays([arrays[i]])[0]
                except Exception as e:  # noqa: BLE001 - reported in the `error` column
                    why = str(e) if isinstance(e, Banana100Error) else f"{type(e).__name__}: {e}"
                    errors[i] = f"{chunk[i][0].name}: {why}"
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


class _Processes:
    """This process's place in a distributed run (`accelerate launch` or `torchrun`), or a lone one.

    accelerate's PartialState reads the launcher's environment (RANK, WORLD_SIZE, ...); it
    gives the rank, the process count and a barrier. With one process nothing is imported.
    """

    def __init__(self, device: str | None):
        self.rank, self.world, self.local_rank, self._state = 0, 1, 0, None
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            from accelerate import PartialState

            import torch

            cpu = device == "cpu" or (device is None and not torch.cuda.is_available())
            self._state = PartialState(cpu=cpu)
            self.rank, self.world = self._state.process_index, self._state.num_processes
            self.local_rank = self._state.local_process_index

    def device(self, device: str | None) -> str | None:
        """One GPU per process: 'cuda' (or the default) becomes 'cuda:<local rank>'."""
        import torch

        if self.world > 1 and device in (None, "cuda") and torch.cuda.is_available():
            return f"cuda:{self.local_rank}"
        return device

    def barrier(self) -> None:
        if self._state is not None:
            self._state.wait_for_everyone()


def score_to_parquet(
    source: str | os.PathLike,
    metrics: list[str],
    out: str | os.PathLike,
    device: str | None = None,
    batch_size: int = 8,
    chunk_size: int = 32,
    progress: bool = True,
    decode_workers: int | None = None,
) -> Path:
    """Score every image of `source` with `metrics` into `out`; resumes where a previous run stopped.

    Under `accelerate launch -m banana100 score ...` (or `torchrun -m banana100 score ...`)
    each process takes every n-th image, writes its own part files, and process 0 merges all
    of them into `out` once every process is done. `decode_workers` threads decode images
    (default: up to 4).
    """
    from concurrent.futures import ThreadPoolExecutor

    out = Path(out)
    if out.suffix != ".parquet":
        raise Banana100Error(f"{out}: the scores file must end in .parquet")
    out.parent.mkdir(parents=True, exist_ok=True)
    procs = _Processes(device)
    total, items = iter_items(Path(source))
    scorers = build_scorers(metrics, device=procs.device(device), batch_size=batch_size)
    done = _done_keys(read_scores(out))
    parts = _parts_dir(out)
    prefix = "part-" if procs.world == 1 else f"part-rank{procs.rank:03d}-"
    procs.barrier()  # every process has read what is done before anyone writes
    if procs.world > 1:
        print(f"banana100 score: process {procs.rank}/{procs.world} scores every {procs.world}th image "
              f"from #{procs.rank}", file=sys.stderr, flush=True)

    n_errors = 0
    chunk: list[tuple[ImageItem, list[str]]] = []
    share = total // procs.world + (procs.rank < total % procs.world)
    bar = tqdm(total=share, unit="img", desc="scoring", disable=not progress or procs.rank != 0, file=sys.stderr)
    workers = decode_workers if decode_workers is not None else min(4, os.cpu_count() or 1)
    pool = ThreadPoolExecutor(workers) if workers > 1 else None

    def flush():
        nonlocal n_errors
        if chunk:
            rows = _score_chunk(chunk, scorers, pool)
            n_errors += sum(r["error"] is not None for r in rows)
            _write_part(parts, rows, prefix)
            bar.update(len(chunk))
            chunk.clear()

    try:
        for index, item in enumerate(items):
            if index % procs.world != procs.rank:
                continue
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
        if pool is not None:
            pool.shutdown()
    procs.barrier()
    if procs.rank == 0:
        _merge(out)
    procs.barrier()
    if n_errors:
        warnings.warn(f"{n_errors} (image, metric) pairs could not be scored; see the `error` column of {out}",
                      stacklevel=2)
    return out
