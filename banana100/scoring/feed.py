"""Decoded images in, rows out: this process's share of the images decoded ahead of the scoring,
and one chunk scored by every metric it still needs (through the one feed of the library,
`banana100.metrics.engine.feed`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from banana100.errors import Banana100Error
from banana100.fileio import sha256_bytes
from banana100.imageio import decode_ahead, load_rgb
from banana100.metrics.engine.feed import SharedUploads, blame_any, measure_chunk
from banana100.scoring.inputs import ImageItem, Source, with_sha256
from banana100.scoring.store import RECORD_COLUMNS, score_key


@dataclass
class Decoded:
    """One image of this process's share, decoded (or why not)."""

    record: dict
    name: str
    needed: list[str]  # metrics still to score; [] for an image already done (progress only)
    rgb: np.ndarray | None = None
    error: str | None = None


def decoded_images(source: Source, metrics: list[str], done: set, rank: int = 0, world: int = 1,
                   workers: int = 0) -> Iterator[Decoded]:
    """This process's images (every `world`-th from `rank`) in order, read and decoded by
    `workers` threads ahead of the scoring (`banana100.imageio.decode_ahead`; 0: in this thread).
    Images already scored come through undecoded (`needed == []`), so the progress bar still
    counts them."""
    mine = (item for index, item in enumerate(Source.of(source).items()) if index % world == rank)

    def decode(item: ImageItem) -> Decoded:
        item = with_sha256(item)  # a plain image is keyed by its bytes too
        needed = [m for m in metrics if score_key(item.record, m) not in done]
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


def score_chunk(chunk: list[Decoded], scorers: dict, uploads: SharedUploads | None = None) -> list[dict]:
    """Score each decoded image with every metric it still needs (`banana100.metrics.engine.feed`:
    the engine's scorers share one upload of each same-size group); a failure is isolated to its
    image (`blame_any`), so a long run goes on. One row per (image, metric needed)."""
    arrays, names = [d.rgb for d in chunk], [d.name for d in chunk]
    scored = measure_chunk(scorers, arrays, names, [d.record for d in chunk], [d.needed for d in chunk],
                           uploads, blame=blame_any(names))
    rows = []
    for metric, scorer in scorers.items():
        got = scored[metric]
        for i, d in enumerate(chunk):
            if metric not in d.needed:
                continue
            error = d.error if d.rgb is None else got.errors.get(i)
            score = got.scores[i]
            rows.append({
                **{c: d.record.get(c) for c in RECORD_COLUMNS},
                "metric": metric,
                "score": float("nan") if score is None or error is not None else score,
                "lower_better": scorer.spec.lower_better,
                "error": None if error is None else str(error),
                "backend": scorer.backend,
                "mode": scorer.mode,
                "precision": scorer.precision,
                "flat_share": got.flat_shares[i],
                "components": got.components[i] if error is None else None,
                **({"text": got.texts[i]} if got.texts[i] is not None else {}),  # not a column: the texts file
            })
    return rows
