"""Live chains (the Space's "Try it"): an upload read safely, a chain made in memory from one
image (`stream_chain`, through `banana100.chains.step`), its scores table, the live metrics and
the samples."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from banana100.errors import UploadError
from banana100.explore.common import thumbnail
from banana100.schema import chain_id as make_chain_id


def check_upload(path: str | os.PathLike, max_bytes: int = 10 * 1024**2, max_pixels: int = 16_000_000,
                 formats=("PNG", "JPEG", "WEBP", "BMP"), min_side: int = 32) -> np.ndarray:
    """Read an uploaded image file safely; UploadError with a plain message when refused.

    `min_side`: the smallest side accepted; the Space passes the largest minimum size of the
    metrics it scores live, so that no curve is missing for a small upload.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        raise UploadError("the upload could not be read; please upload it again") from None
    if size > max_bytes:
        raise UploadError(f"the file is {size / 1024**2:.1f} MB; the limit is {max_bytes / 1024**2:.0f} MB")
    if size == 0:
        raise UploadError("the file is empty")
    from banana100.imageio import load_rgb

    try:
        with Image.open(path) as img:
            fmt, (w, h) = img.format, img.size
    except Exception:  # noqa: BLE001 - PIL raises several types for non-images
        raise UploadError(f"this file is not an image we can read; upload a {', '.join(formats)} image") from None
    if fmt not in formats:
        raise UploadError(f"{fmt} images are not accepted; upload a {', '.join(formats)} image")
    if w * h > max_pixels:
        raise UploadError(f"the image is {w}x{h} = {w * h / 1e6:.1f} megapixels; the limit is {max_pixels / 1e6:.0f} megapixels")
    if min(w, h) < min_side:
        raise UploadError(f"the image is {w}x{h}; it needs at least {min_side} pixels a side")
    try:
        return load_rgb(path)
    except Exception as e:  # noqa: BLE001 - truncated or corrupt files
        raise UploadError(f"the image could not be decoded ({type(e).__name__})") from None


def shrink(rgb: np.ndarray, max_side: int) -> np.ndarray:
    """An HxWx3 uint8 array with its longest side at most `max_side` (Lanczos)."""
    if max(rgb.shape[:2]) <= max_side:
        return rgb
    return np.asarray(thumbnail(Image.fromarray(rgb), max_side))


# A live chain is named like any other (source "live", repeat 0); the Space runs `replicate`.
LIVE_SOURCE_ID = "live"
LIVE_CHAIN_ID = make_chain_id(LIVE_SOURCE_ID, "replicate", 0)


def stream_chain(editor, image: np.ndarray, steps: int, setting: str = "replicate", seed: int = 0,
                 chain_id: str | None = None) -> Iterator[tuple[int, np.ndarray, dict]]:
    """Yield (step, rgb, metadata) for step 0 (the image) and each of `steps` edits, in memory.

    Each step is made by `banana100.chains.step`, as `generate_chains` makes it in the chain
    `chain_id` (default: the live chain of `setting`) with base seed `seed` (the setting's
    prompt, seed rule and transforms for that step, the stored-PNG round trip), but nothing is
    written to disk.
    """
    from banana100.chains.settings import get_setting
    from banana100.chains.step import edit_request, make_step
    from banana100.imageio import encode_png

    s = get_setting(setting)
    chain_id = chain_id or make_chain_id(LIVE_SOURCE_ID, s.name, 0)
    current = np.ascontiguousarray(image)
    current_bytes = encode_png(current)  # the runner stores step 0 as this PNG and sends its bytes
    yield 0, current, {}
    for k in range(1, int(steps) + 1):
        out = make_step(editor, edit_request(s, k, current, seed, chain_id, image_bytes=current_bytes))
        current, current_bytes = out.rgb, out.data
        yield k, current, out.metadata


def scores_frame(rows: list[dict], chain_id: str = LIVE_CHAIN_ID) -> pd.DataFrame:
    """[{step, metric, score}] -> a scores table (the columns `chain_curves` and `analyse` read)."""
    df = pd.DataFrame(rows, columns=["step", "metric", "score"])
    df["chain_id"] = chain_id
    from banana100.metrics.resolve import resolve

    df["lower_better"] = [resolve(m).lower_better for m in df["metric"]]
    return df


def live_metrics(shown: list[str] | None = None) -> list[str]:
    """The metrics of the Space's live chain and upload scoring: the demo's choice (`pick_metrics
    ("auto")`: the fast hand-crafted metrics whose files are at hand), kept to those `shown` on
    the release's curves when given, so the live curves compare with them; PIQE (no files) at least."""
    from banana100.demo import pick_metrics

    chosen = pick_metrics("auto")
    return [m for m in chosen if not shown or m in shown] or ["piqe"]


def sample_names() -> list[str]:
    """Names of the "Try it" samples: the generated sources, then the bundled photographs."""
    from banana100.demo import SAMPLE_IMAGES
    from banana100.synth import GENERATED_SOURCES

    return [*GENERATED_SOURCES, *(Path(name).stem for name, _ in SAMPLE_IMAGES)]


def sample_image(name: str, side: int = 1024) -> np.ndarray:
    """A sample by name (one of `sample_names()`); never a path from the caller."""
    import skimage.data

    from banana100.demo import SAMPLE_IMAGES
    from banana100.synth import GENERATED_SOURCES, generated_source
    from banana100.imageio import load_rgb

    if name in GENERATED_SOURCES:
        return generated_source(name, side)
    files = {Path(f).stem: f for f, _ in SAMPLE_IMAGES}
    if name not in files:
        raise UploadError(f"unknown sample {name!r}; choose one of {', '.join(sample_names())}")
    return load_rgb(Path(skimage.data.data_dir) / files[name])
