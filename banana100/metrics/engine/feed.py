"""The one feed: decoded images in, each scorer's `Scores` out, for the library (`Scorer.score`,
the evaluate modules) and for `banana100 score` alike.

Images go in chunks. A chunk's same-size groups are uploaded to the device once, as uint8, and
every scorer that shares uploads (`Scorer.shares_uploads`: the engine's) scores them there; a
thread uploads chunk k+1 while chunk k is scored, and files are decoded ahead by threads
(`banana100.imageio.decode_ahead`). Other scorers (VisualQuality-R1, edit_damage_rel, a user's
module) take the arrays.

    scored = measure_chunk({"niqe": niqe, "piqe": piqe}, arrays, names)   # {metric: Scores}
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

import numpy as np

from banana100.errors import Banana100Error, ImageReadError, ScoringStopped
from banana100.imageio import decode_ahead, load_rgb
from banana100.metrics.engine.contract import Scorer, Scores, isolating
from banana100.metrics.engine.upload import Uploaded, Uploader

T = TypeVar("T")
Blame = Callable[[int, Exception], "Banana100Error | None"]


class SharedUploads:
    """A chunk's images on the device, uploaded once per same-size group for every scorer."""

    def __init__(self, arrays: Sequence[np.ndarray | None]):
        self.arrays = list(arrays)
        self._uploader: Uploader | None = None
        self._batches: dict[tuple, tuple[list[int], Uploaded]] = {}  # shape -> (chunk indices, batch)

    def groups(self, wanted: Sequence[int]) -> list[tuple[list[int], tuple]]:
        """(indices, their shape) per same-size group of `wanted`."""
        by_shape: dict[tuple, list[int]] = {}
        for i in wanted:
            by_shape.setdefault(self.arrays[i].shape, []).append(i)
        return [(indices, shape) for shape, indices in by_shape.items()]

    def preload(self, device) -> None:
        """Upload every same-size group now (`uploads_ahead`'s thread). Best effort: a group that
        fails here (out of memory, say) is uploaded again on request, where its failure is
        isolated image by image."""
        for shape in {a.shape for a in self.arrays if a is not None}:
            try:
                self._group(device, shape)
            except Exception:  # noqa: BLE001 - retried, and reported, on request
                self._batches.pop(shape, None)

    def batch(self, device, shape: tuple, wanted: Sequence[int]) -> Uploaded:
        """The images `wanted` (chunk indices, all of `shape`) on `device`; their size group is
        uploaded on the first request (or ahead, `preload`) and kept for the chunk's other scorers."""
        members, batch = self._group(device, shape)
        where = {i: k for k, i in enumerate(members)}
        return batch.take([where[i] for i in wanted])

    def _group(self, device, shape) -> tuple[list[int], Uploaded]:
        if self._uploader is None or self._uploader.device != device:
            self._uploader, self._batches = Uploader(device), {}
        if shape not in self._batches:  # every image of this size that any scorer needs
            members = [i for i, a in enumerate(self.arrays) if a is not None and a.shape == shape]
            self._batches[shape] = members, self._uploader.upload([self.arrays[i] for i in members])
        return self._batches[shape]


def measure_chunk(scorers: Mapping[str, Scorer], arrays: Sequence[np.ndarray | None], names: Sequence[str],
                  records: Sequence[dict] | None = None, needed: Sequence[Iterable[str]] | None = None,
                  uploads: SharedUploads | None = None, blame: Blame | None = None) -> dict[str, Scores]:
    """Each scorer's Scores of the chunk's images it needs (`needed[i]`: the metrics image i still
    needs; default all; an image whose array is None is skipped: its decode failed). The results
    are indexed like `arrays`; an image a scorer did not score has a None score and no error.
    `blame` (`isolating`) decides which failure of a call is an image's, retried image by image;
    None: a failure propagates (a library call: the caller sees the error)."""
    uploads = uploads or SharedUploads(arrays)
    out = {}
    for metric, scorer in scorers.items():
        todo = [i for i, a in enumerate(arrays) if a is not None and (needed is None or metric in needed[i])]
        groups = uploads.groups(todo) if scorer.shares_uploads else [(todo, None)] if todo else []
        parts: list[tuple[list[int], Scores]] = []
        for group, shape in groups:
            def run(idx: list[int], shape=shape) -> Scores:
                if shape is not None:
                    return scorer.measure_uploaded(uploads.batch(scorer.device, shape, idx), [names[i] for i in idx])
                return scorer.measure([arrays[i] for i in idx], [names[i] for i in idx],
                                      None if records is None else [records[i] for i in idx])

            pairs = isolating(run, group, blame) if blame is not None else [(group, run(group))]
            parts += [(idx, got if isinstance(got, Scores) else Scores.failed(len(idx), got)) for idx, got in pairs]
        out[metric] = Scores.gather(len(arrays), parts)
    return out


def blame_any(names: Sequence[str]) -> Blame:
    """`banana100 score`'s rule: any failure of a call is retried image by image, and an image that
    fails alone gets a row with the error (named by its file), so that a long run goes on."""
    def blame(i: int, e: Exception) -> Banana100Error | None:
        if isinstance(e, ScoringStopped):  # the scorer cannot go on (a user's module that exited, hung): the run stops
            return None
        return e if isinstance(e, Banana100Error) else Banana100Error(f"{names[i]}: {type(e).__name__}: {e}")

    return blame


def uploads_ahead(chunks: Iterable[T], arrays_of: Callable[[T], Sequence[np.ndarray | None]],
                  device) -> Iterator[tuple[T, SharedUploads]]:
    """(chunk, its uploads) for each chunk, in order; a thread uploads chunk k+1's same-size groups
    to `device` while the caller scores chunk k, so the device does not wait for the host's copy
    between chunks. `device` None: uploaded on request."""
    def prepare(chunk: T) -> SharedUploads:
        uploads = SharedUploads(arrays_of(chunk))
        if device is not None:
            uploads.preload(device)
        return uploads

    for chunk, uploads in decode_ahead(chunks, prepare, workers=1, ahead=1, catch=()):
        yield chunk, uploads


def chunk_size_for(scorer: Scorer) -> int:
    """Images per chunk of a library call: two of the scorer's largest batches, at least 16."""
    return max(16, 2 * scorer.largest_batch)


def measure_arrays(scorer: Scorer, arrays: Sequence[np.ndarray], names: Sequence[str]) -> Scores:
    """One scorer's Scores of decoded arrays, chunk by chunk through the shared uploads."""
    n, size = len(arrays), chunk_size_for(scorer)
    chunks = [list(range(k, min(k + size, n))) for k in range(0, n, size)]
    device = scorer.device if scorer.shares_uploads else None
    parts = []
    for idx, uploads in uploads_ahead(chunks, lambda idx: [arrays[i] for i in idx], device):
        got = measure_chunk({scorer.name: scorer}, uploads.arrays, [names[i] for i in idx], uploads=uploads)
        parts.append((idx, got[scorer.name]))
    return Scores.gather(n, parts)


def measure_files(scorer: Scorer, images: Sequence, names: Sequence[str], workers: int,
                  max_pixels: int | None = None) -> Scores:
    """One scorer's Scores of images (paths, bytes, PIL images, arrays), files decoded ahead by
    `workers` threads, a chunk at a time (memory holds about two chunks of decoded images). A file
    whose pixel data turn out corrupt is an `errors` entry (ImageReadError); the others are scored."""
    n, size = len(images), chunk_size_for(scorer)
    decoded = decode_ahead(range(n), lambda i: load_rgb(images[i], max_pixels), workers, ahead=max(size, 2 * workers))
    failed: dict[int, Banana100Error] = {}

    def chunks() -> Iterator[list[tuple[int, np.ndarray]]]:
        while batch := list(itertools.islice(decoded, size)):
            ok = []
            for i, rgb in batch:
                if isinstance(rgb, ImageReadError):
                    failed[i] = rgb
                else:
                    ok.append((i, rgb))
            yield ok

    device = scorer.device if scorer.shares_uploads else None
    parts = []
    try:
        for chunk, uploads in uploads_ahead(chunks(), lambda c: [rgb for _, rgb in c], device):
            idx = [i for i, _ in chunk]
            got = measure_chunk({scorer.name: scorer}, uploads.arrays, [names[i] for i in idx], uploads=uploads)
            parts.append((idx, got[scorer.name]))
    finally:  # a failed chunk stops the decoding threads at once
        decoded.close()
    out = Scores.gather(n, parts)
    out.errors.update(failed)
    for i in failed:
        out.scores[i] = None
    return out
