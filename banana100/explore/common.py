"""What the parts of `banana100.explore` share: the Space's environment variables, the display
size and the thumbnails shown, the detector's name and how a metric is labelled."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image


#: Environment variables the Space reads (see `SpaceConfig.from_env`).
DATASET_ENV = "BANANA100_SPACE_DATASET"  # a dataset folder, a run folder, or a Hub dataset id
SCORES_ENV = "BANANA100_SPACE_SCORES"  # a scores Parquet file (`banana100 score`), or hf://datasets/<id>/<file>
CACHE_ENV = "BANANA100_SPACE_CACHE"  # where the demo set (and Hub downloads) go
RELEASE_ENV = "BANANA100_SPACE_RELEASE"  # the original release: Hub id, hf:// URL or a local copy laid out the same
RELEASE_PATTERN_ENV = "BANANA100_SPACE_RELEASE_PATTERN"  # how its file paths name chain and step
CHECK_STEPS_ENV = "BANANA100_SPACE_CHECK_STEPS"  # e.g. "2,5,10"; default: the paper's, scaled to short chains
DEFAULT_CACHE = Path.home() / ".cache" / "banana100-space"

DISPLAY_SIDE = 768  # longest side of the images shown
_THUMB_QUALITY = 95


#: This toolkit's own detector of recursive-edit damage: needs no files, so the demo set and the
#: release view score it beside the NR-IQA metrics (`metrics/edit_damage`).
from banana100.metrics.detector.model import NAME as DETECTOR  # noqa: E402
#: The detector against the chain's step 0 (`banana100/metrics/detector/relative.py`): `banana100
#: score` adds it to chains scored with the detector; the release view computes it on demand.
from banana100.metrics.detector.model import REL_NAME as RELATIVE  # noqa: E402
DETECTORS = (DETECTOR, RELATIVE)


def with_detector(metrics: list[str]) -> list[str]:
    """`metrics` and the detector after them (once); the relative detector last when it is among them."""
    rel = [RELATIVE] if RELATIVE in metrics else []
    return [*[m for m in metrics if m not in DETECTORS], DETECTOR, *rel]


def metric_label(metric: str) -> str:
    from banana100.metrics.resolve import label

    return label(metric)  # the table's name, or a user's metric (pyiqa:<id>, a module) as resolved


def thumbnail(img: Image.Image, max_side: int) -> Image.Image:
    img = img.convert("RGB")
    if max(img.size) > max_side:
        img = img.copy()
        img.thumbnail((max_side, max_side), Image.LANCZOS)
    return img


def jpeg_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=_THUMB_QUALITY, subsampling=0)  # 4:4:4: keeps the colour grain
    return buf.getvalue()
