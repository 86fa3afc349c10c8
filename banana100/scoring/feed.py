"""Decoded images in, rows out: this process's share of the images decoded ahead of the scoring,
and one chunk scored by every metric it still needs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from banana100.errors import Banana100Error, ImageTooSmallError
from banana100.imageio import decode_ahead, load_rgb
from banana100.fileio import sha256_bytes
from banana100.metrics.engine import check_size
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


def _score_chunk(chunk: list[Decoded], scorers: dict) -> list[dict]:
    """Score each decoded image with every metric it still needs."""
    rows = []
    arrays = [d.rgb for d in chunk]
    decode_errors = [d.error for d in chunk]

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
        try:
            scores.update(zip(ok, _call(scorer, [arrays[i] for i in ok], [chunk[i].name for i in ok],
                                        [chunk[i].record for i in ok])))
            shares.update(zip(ok, scorer.flat_shares))
            texts.update(zip(ok, getattr(scorer, "last_texts", ())))
        except Exception as e:  # noqa: BLE001 - isolate the image that failed; the others go on
            if isinstance(e, Banana100Error) and getattr(e, "errors", None) is not None:
                # some images have no score (uniform, NaN): the engine scored the others and named each
                texts.update(zip(ok, getattr(scorer, "last_texts", ())))
                for k, i in enumerate(ok):
                    if k in e.errors:
                        errors[i] = str(e.errors[k])  # named by chunk[i].name already
                    else:
                        scores[i], shares[i] = e.scores[k], scorer.flat_shares[k]
            else:
                for i in ok:
                    try:
                        scores[i] = _call(scorer, [arrays[i]], [chunk[i].name], [chunk[i].record])[0]
                        shares[i] = scorer.flat_shares[0]
                        texts.update(zip([i], getattr(scorer, "last_texts", ())))
                    except Banana100Error as e1:  # reported in the `error` column, named already
                        errors[i] = str(e1)
                    except Exception as e1:  # noqa: BLE001 - reported in the `error` column
                        errors[i] = f"{chunk[i].name}: {type(e1).__name__}: {e1}"
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
                "flat_share": shares.get(i),
                **({"text": texts[i]} if texts.get(i) is not None else {}),  # not a column: the texts file
            })
    return rows


def _call(scorer, arrays, names, records):
    """score_arrays, with each image's manifest record for a scorer that reads references from it
    (edit_damage_rel: banana100/metrics/native/edit_damage_rel.py)."""
    if getattr(scorer, "takes_records", False):
        return scorer.score_arrays(arrays, names, records=records)
    return scorer.score_arrays(arrays, names)
