"""`banana100 score`: every image of a run or dataset folder x every metric -> one Parquet file.

Rows are written as they are computed, in small part files beside the output
(`<out>.parts/`), each renamed into place only when complete; the final file merges them.
Rerunning the same command skips every (chain, step, metric) already scored, so an
interrupted run loses at most one chunk. One image that cannot be scored (too small for a
metric, undecodable, over the pixel limit, or with no defined score: a uniform image for a
metric whose statistics need variation, a NaN result) gets a row with a NaN score and an
`error` message saying why; the others go on.

The package: inputs (what is read), store (the scores file and its parts), feed (decode and
score a chunk), ready (which metrics, checked before any work); this module runs them.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from banana100.distributed import Processes
from banana100.errors import ScoringStopped, UsageError
from banana100.fileio import ExclusiveLock
from banana100.metrics.athand import metrics_at_hand
from banana100.metrics.engine.feed import uploads_ahead
from banana100.scoring.feed import Decoded, decoded_images, score_chunk
from banana100.scoring.inputs import ImageItem, Source, image_files, iter_items, source_ids
from banana100.scoring.ready import DEFAULT_METRICS, build_scorers, check_metrics_ready
from banana100.scoring.references import attach_references, with_companions
from banana100.scoring.provenance import Made, check_reference
from banana100.scoring.store import (RECORD_COLUMNS, SCORES_SCHEMA, append_texts, drop_temporary_files, merge_parts,
                                     parts_dir, write_part, check_out, read_scores, say_other_rows, score_key)

log = logging.getLogger(__name__)
DEFAULT_CHUNK = 32  # images per chunk: rows are written (and kept for a resume) chunk by chunk

__all__ = ["DEFAULT_METRICS", "Decoded", "ImageItem", "RECORD_COLUMNS", "SCORES_SCHEMA", "ScoreRun", "Source",
           "build_scorers", "check_metrics_ready", "decoded_images", "image_files", "iter_items", "metrics_at_hand",
           "read_scores", "score_to_parquet"]


@dataclass
class ScoreRun:
    """One `banana100 score`, checked before any work: the source classified once, the metrics
    with their companions (edit_damage_rel beside edit_damage, where the images have references),
    every extra and file at hand. `run` then scores into `out`."""

    source: Source
    metrics: list[str]
    reference: object = None
    backend: str | None = None

    @classmethod
    def plan(cls, source, metrics: list[str], reference=None, backend: str | None = None) -> "ScoreRun":
        if not isinstance(source, (str, os.PathLike, Source)):
            source = list(source)
            source = source[0] if len(source) == 1 else source
        source = Source.of(source)  # checks the source before any model is built
        if reference is not None and source.chains:
            raise UsageError("a reference image is for plain images: a chain's reference is its own step 0")
        if reference is not None:
            check_reference(reference, metrics)  # a usage error before any work, naming it
        metrics = with_companions(list(metrics), references=source.chains or reference is not None)
        check_metrics_ready(metrics, backend)  # every missing extra and file, in one message
        return cls(source, metrics, reference, backend)

    def run(self, out, device=None, batch_size: int | None = None, chunk_size: int | None = None,
            progress: bool = True, decode_workers: int | None = None, mode: str = "pyiqa", keep_text: bool = False,
            max_pixels: int | None = None, precision: str = "exact") -> Path:
        """Score into `out` (see `score_to_parquet`), under the lock that keeps a second run off it."""
        from banana100.metrics.engine.scorer import check_device
        from banana100.metrics.precision import check_precision

        check_precision(precision)
        out = Path(out)
        check_out(out)  # a folder, or a file that is not a scores file: refused before any work
        out.parent.mkdir(parents=True, exist_ok=True)
        procs = Processes(device)
        device = check_device(procs.device(device))  # the one place a device name becomes a torch.device
        options = {"keep_text": keep_text, **({"max_pixels": max_pixels} if max_pixels else {})}
        # the same kind of lock as `generate`: a second run on the same --out refuses (each process of
        # a distributed run holds its rank's lock, so two distributed runs on one --out refuse too)
        lock = out.with_name(f".{out.name}.lock" + (f".rank{procs.rank}" if procs.rank else ""))
        with ExclusiveLock(lock, out, "banana100 score", remove=True):
            if procs.rank == 0:
                drop_temporary_files(out)
            scorers = build_scorers(self.metrics, device=device, batch_size=batch_size, backend=self.backend,
                                    mode=mode, precision=precision, **options)
            attach_references(scorers, self.source.given, self.reference)
            self._score(scorers, out, procs, chunk_size, progress, decode_workers)
        return out

    def _score(self, scorers: dict, out: Path, procs: Processes, chunk_size: int | None, progress: bool,
               decode_workers: int | None) -> None:
        if chunk_size is None:  # what each scorer gets in one call: by default never fewer than its
            # largest batch (VisualQuality-R1 sizes its batch by the free memory, up to 64 images)
            chunk_size = max([DEFAULT_CHUNK, *(s.largest_batch for s in scorers.values())])
        texts_file = Path(f"{out}.texts.jsonl" if procs.world == 1 else f"{out}.texts.rank{procs.rank:03d}.jsonl")
        before = read_scores(out)
        made = Made(scorers, self.source.given, self.reference)  # compared with what made the rows before
        made.check(before, out)
        if procs.rank == 0:
            say_other_rows(before, source_ids(self.source.given), out)  # rows added to an existing file: one line
        done = made.done_keys(before, score_key)
        parts = parts_dir(out)
        prefix = "part-" if procs.world == 1 else f"part-rank{procs.rank:03d}-"
        procs.barrier()  # every process has read what is done before anyone writes
        if procs.world > 1:
            log.info("process %d/%d scores every %dth image from #%d", procs.rank, procs.world, procs.world,
                     procs.rank)
        n_errors = 0
        total = self.source.total
        share = total // procs.world + (procs.rank < total % procs.world)
        bar = tqdm(total=share, unit="img", desc="scoring", disable=not progress or procs.rank != 0, file=sys.stderr)
        workers = decode_workers if decode_workers is not None else min(4, os.cpu_count() or 1)
        images = decoded_images(self.source, list(scorers), done, procs.rank, procs.world, workers)
        # one device for the engine's scorers: chunk k+1 goes there (a thread) while chunk k is scored
        devices = {s.device for s in scorers.values() if s.shares_uploads}
        device = next(iter(devices)) if len(devices) == 1 else None
        try:
            for chunk, uploads in uploads_ahead(_chunks(images, chunk_size, bar), lambda c: [d.rgb for d in c],
                                                device):
                rows = made.stamp(score_chunk(chunk, scorers, uploads))
                n_errors += sum(r["error"] is not None for r in rows)
                write_part(parts, rows, prefix)
                append_texts(texts_file, rows)
                bar.update(len(chunk))
        except ScoringStopped:  # a scorer that cannot go on: what was scored before goes into `out`, then the error
            if procs.world == 1:
                merge_parts(out, self.source.scope())
            raise
        finally:
            bar.close()
            images.close()  # stops the decoding threads, also after an interruption
        procs.barrier()
        if procs.rank == 0:
            merge_parts(out, self.source.scope())
        procs.barrier()
        if n_errors:
            warnings.warn(f"{n_errors} (image, metric) pairs could not be scored; see the `error` column of {out}",
                          stacklevel=4)


def _chunks(images, size: int, bar):
    """The decoded images that still need a metric, `size` at a time; the others only count."""
    chunk: list[Decoded] = []
    for d in images:
        if not d.needed:
            bar.update(1)
            continue
        chunk.append(d)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def score_to_parquet(
    source: str | os.PathLike,
    metrics: list[str],
    out: str | os.PathLike,
    device: str | None = None,
    batch_size: int | None = None,
    chunk_size: int | None = None,
    progress: bool = True,
    decode_workers: int | None = None,
    backend: str | None = None,
    mode: str = "pyiqa",
    keep_text: bool = False,
    max_pixels: int | None = None,
    reference=None,
    precision: str = "exact",
    timeout_per_batch: float | None = None,
) -> Path:
    """Score every image of `source` with `metrics` into `out`; resumes where a previous run stopped.

    `source`: a run folder, a dataset folder, or plain images: a folder of them (searched
    recursively), image files, glob patterns, or a list of these. Plain images get one row per
    (image, metric) with `image` = the path (absolute: `inputs.canonical_image_path`) and no chain
    columns (chain_id and step are null); a changed image is scored again, and the merge drops
    the stale rows (`store.drop_stale_plain_rows`). `batch_size`: the most images per forward pass
    for every metric; None (the default): each metric's own (8 same-size images; VisualQuality-R1:
    as many as the free GPU memory holds).

    Under `accelerate launch -m banana100 score ...` (or `torchrun -m banana100 score ...`)
    each process takes every n-th image, writes its own part files, and process 0 merges all
    of them into `out` once every process is done. `decode_workers` threads read and decode
    the images ahead of the scoring (default: up to 4; 0 decodes in this thread). Images go to
    the metrics `chunk_size` at a time (default: 32, or a metric's largest batch when that is
    more); each chunk's rows are written before the next (what a resume keeps).
    `keep_text` (VisualQuality-R1) appends what the model answered for each image to
    `<out>.texts.jsonl` (one per process in a distributed run); `max_pixels` sets its image size.
    With `edit_damage` among the metrics, chains (and plain images given a `reference` image) also
    get `edit_damage_rel`, the damage added since the chain's step 0 (or that reference).
    `precision` "fast" allows TF32 (and bfloat16 autocast for the deep metrics) on a GPU; the
    `precision` column records it, and a rerun refuses to mix precisions. `timeout_per_batch`: the
    seconds a user's evaluate module may take to load or on one batch (default:
    `usermodule.DEFAULT_TIMEOUT_S`; 0: no limit) before the run stops, keeping what was scored
    (banana100/metrics/usermodule.py).
    """
    from banana100.metrics.precision import check_precision

    check_precision(precision)
    if timeout_per_batch is not None:
        from banana100.metrics.usermodule import set_timeout

        set_timeout(timeout_per_batch)
    check_out(Path(out))  # before the source and the metrics: a wrong --out is the cheapest check
    return ScoreRun.plan(source, metrics, reference, backend).run(
        out, device=device, batch_size=batch_size, chunk_size=chunk_size, progress=progress,
        decode_workers=decode_workers, mode=mode, keep_text=keep_text, max_pixels=max_pixels, precision=precision)
