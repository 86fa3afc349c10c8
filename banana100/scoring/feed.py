"""Decoded images in, rows out: this process's share of the images decoded ahead of the scoring,
and one chunk scored by every metric it still needs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from banana100.errors import Banana100Error, ImageTooSmallError
from banana100.imageio import decode_ahead, load_rgb
from banana100.fileio import sha256_bytes
from banana100.metrics.engine.scorer import check_size
from banana100.metrics.engine.upload import Uploaded, Uploader
from banana100.scoring.inputs import ImageItem, iter_items, with_sha256
from banana100.scoring.store import RECORD_COLUMNS, _key


@dataclass
class Decoded:
    """One image of this process's share, decoded (or why not)."""

    record: dict
    name: str
    needed: list[str]  # metrics still to score; [] for an image already done (progress only)
    rgb: np.ndarray | None = None
    error: str | None = None


def decoded_images(source: Path, metrics: list[str], done: set, rank: int = 0, world: int = 1,
                   workers: int = 0) -> Iterator[Decoded]:
    """This process's images (every `world`-th from `rank`) in order, read and decoded by
    `workers` threads ahead of the scoring (`banana100.imageio.decode_ahead`; 0: in this thread).
    Images already scored come through undecoded (`needed == []`), so the progress bar still
    counts them."""
    _, items = iter_items(source)
    mine = (item for index, item in enumerate(items) if index % world == rank)

    def decode(item: ImageItem) -> Decoded:
        item = with_sha256(item)  # a plain image is keyed by its bytes too
        needed = [m for m in metrics if _key(item.record, m) not in done]
        d = Decoded(item.record, item.name, needed)
        if needed:
            data = b""
            try:
                data = item.read()
                d.rgb = load_rgb(data)
                if item.record.get("chain_id") is None:  # a plain image: what a manifest would say
                    d.record = {**item.record, "sha256": sha256_bytes(data),
                                "height": d.rgb.shape[0], "width": d.rgb.shape[1]}
            except (Banana100Error, OSError) as e:  # named by the file, not as "<N bytes>"
                d.error = f"{item.name}: {str(e).removeprefix(f'<{len(data)} bytes>: ')}"
        return d

    decoded = decode_ahead(mine, decode, workers, ahead=4 * max(1, workers), catch=())
    try:
        for _, d in decoded:
            yield d
    finally:
        decoded.close()


def uploads_ahead(chunks: Iterable[list[Decoded]], scorers: dict) -> Iterator[tuple[list[Decoded], "_SharedUploads"]]:
    """(chunk, its uploads) for each chunk, in order; a thread uploads chunk k+1's same-size
    groups to the engine scorers' device while the caller scores chunk k, so the device does
    not wait for the host's copy between chunks. Several devices, or none: uploaded on request."""
    devices = {s.device for s in scorers.values() if hasattr(s, "score_uploaded")}

    def prepare(chunk: list[Decoded]) -> _SharedUploads:
        uploads = _SharedUploads([d.rgb for d in chunk], chunk)
        if len(devices) == 1:
            uploads.preload(next(iter(devices)))
        return uploads

    for chunk, uploads in decode_ahead(chunks, prepare, workers=1, ahead=1, catch=()):
        yield chunk, uploads


def _score_chunk(chunk: list[Decoded], scorers: dict, uploads: "_SharedUploads | None" = None) -> list[dict]:
    """Score each decoded image with every metric it still needs.

    The engine's scorers share one upload: each same-size group of the chunk goes to the device
    once (as uint8) and every metric scores it there (`MetricScorer.score_uploaded`); other
    scorers (VisualQuality-R1, a user's evaluate module) take the arrays."""
    rows = []
    arrays = [d.rgb for d in chunk]
    decode_errors = [d.error for d in chunk]
    uploads = uploads or _SharedUploads(arrays, chunk)

    for metric, scorer in scorers.items():
        spec = scorer.spec
        todo = [i for i, d in enumerate(chunk) if metric in d.needed]
        errors: dict[int, str] = {}
        ok = []
        for i in todo:
            if arrays[i] is None:
                errors[i] = decode_errors[i]
            else:
                try:  # the engine's own check, so one too-small image does not fail the chunk
                    check_size(spec, arrays[i], chunk[i].name)
                    ok.append(i)
                except ImageTooSmallError as e:
                    errors[i] = str(e)
        scores: dict[int, float] = {}
        shares: dict[int, float | None] = {}
        texts: dict[int, str | None] = {}  # what a language-model evaluator answered (keep_text)
        comps: dict[int, dict | None] = {}  # what the score is made of (the edit_damage detector)
        for group, shape in (uploads.groups(ok) if hasattr(scorer, "score_uploaded") else [(ok, None)]):
            _score_group(scorer, group, shape, uploads, scores, shares, texts, errors, comps)
        for i in todo:
            record = chunk[i].record
            rows.append({
                **{c: record.get(c) for c in RECORD_COLUMNS},
                "metric": metric,
                "score": scores.get(i, float("nan")),
                "lower_better": spec.lower_better,
                "error": errors.get(i),
                "backend": scorer.backend,
                "mode": scorer.mode,
                "precision": getattr(scorer, "precision", "exact"),
                "flat_share": shares.get(i),
                "components": comps.get(i) if i not in errors else None,
                **({"text": texts[i]} if texts.get(i) is not None else {}),  # not a column: the texts file
            })
    return rows


class _SharedUploads:
    """The chunk's images on the device, uploaded once per same-size group for every metric."""

    def __init__(self, arrays: list, chunk: list[Decoded]):
        self.arrays, self.chunk = arrays, chunk
        self._uploader: Uploader | None = None
        self._batches: dict[tuple, tuple[list[int], Uploaded]] = {}  # shape -> (chunk indices, batch)

    def groups(self, ok: list[int]):
        """(indices, their shape) per same-size group of `ok`."""
        by_shape: dict[tuple, list[int]] = {}
        for i in ok:
            by_shape.setdefault(self.arrays[i].shape, []).append(i)
        return [(wanted, shape) for shape, wanted in by_shape.items()]

    def preload(self, device) -> None:
        """Upload every same-size group now (`uploads_ahead`'s thread). Best effort: a group
        that fails here (out of memory, say) is uploaded again on request, where `_score_group`
        isolates the failure image by image as before."""
        for shape in {a.shape for a in self.arrays if a is not None}:
            try:
                self._group(device, shape)
            except Exception:  # noqa: BLE001 - retried, and reported, on request
                self._batches.pop(shape, None)

    def batch(self, device, shape, wanted: list[int]) -> Uploaded:
        """The images `wanted` (chunk indices, all of `shape`) on `device`; their size group is
        uploaded on the first request (or ahead, `preload`) and kept for the chunk's other metrics."""
        members, batch = self._group(device, shape)
        where = {i: k for k, i in enumerate(members)}
        return batch.take([where[i] for i in wanted])

    def _group(self, device, shape) -> tuple[list[int], Uploaded]:
        if self._uploader is None or self._uploader.device != device:
            self._uploader, self._batches = Uploader(device), {}
        if shape not in self._batches:  # every image of this size that any metric needs
            members = [i for i, a in enumerate(self.arrays) if a is not None and a.shape == shape]
            self._batches[shape] = members, self._uploader.upload([self.arrays[i] for i in members])
        return self._batches[shape]


def _score_group(scorer, ok: list[int], shape, uploads: _SharedUploads, scores, shares, texts, errors,
                 comps) -> None:
    """Score the chunk's images `ok` with `scorer` (from the shared upload when `shape` is given,
    else as arrays), filling scores/shares/texts/errors/comps; a failure is isolated to its image."""
    if not ok:
        return
    arrays, chunk = uploads.arrays, uploads.chunk
    names = [chunk[i].name for i in ok]
    try:
        if shape is None:
            got = _call(scorer, [arrays[i] for i in ok], names, [chunk[i].record for i in ok])
        else:
            got = scorer.score_uploaded(uploads.batch(scorer.device, shape, ok), names)
        scores.update(zip(ok, got))
        shares.update(zip(ok, scorer.flat_shares))
        texts.update(zip(ok, getattr(scorer, "last_texts", ())))
        comps.update(zip(ok, getattr(scorer, "components", ())))
    except Exception as e:  # noqa: BLE001 - isolate the image that failed; the others go on
        if isinstance(e, Banana100Error) and getattr(e, "errors", None) is not None:
            # some images have no score (uniform, NaN): the engine scored the others and named each
            texts.update(zip(ok, getattr(scorer, "last_texts", ())))
            for k, i in enumerate(ok):
                if k in e.errors:
                    errors[i] = str(e.errors[k])  # named by chunk[i].name already
                else:
                    scores[i], shares[i] = e.scores[k], scorer.flat_shares[k]
                    comps.update(zip([i], getattr(scorer, "components", ())[k:k + 1]))
        else:
            for i in ok:
                try:
                    scores[i] = _call(scorer, [arrays[i]], [chunk[i].name], [chunk[i].record])[0]
                    shares[i] = scorer.flat_shares[0]
                    texts.update(zip([i], getattr(scorer, "last_texts", ())))
                    comps.update(zip([i], getattr(scorer, "components", ())))
                except Banana100Error as e1:  # reported in the `error` column, named already
                    errors[i] = str(e1)
                except Exception as e1:  # noqa: BLE001 - reported in the `error` column
                    errors[i] = f"{chunk[i].name}: {type(e1).__name__}: {e1}"


def _call(scorer, arrays, names, records):
    """score_arrays, with each image's manifest record for a scorer that reads references from it
    (edit_damage_rel: banana100/metrics/detector/relative.py)."""
    if getattr(scorer, "takes_records", False):
        return scorer.score_arrays(arrays, names, records=records)
    return scorer.score_arrays(arrays, names)
