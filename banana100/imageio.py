"""Image input: everything becomes an RGB uint8 array, the way pyiqa reads images.

pyiqa opens a file with PIL and calls `.convert("RGB")`; we do the same, so scores match:
- grayscale (L, P, 1-bit) is replicated to three channels;
- RGBA / LA lose their alpha channel (no compositing: PIL's convert drops it);
- 16-bit files: PIL reads 16-bit RGB PNGs as their high byte; for 16-bit grayscale PIL would
  clip every value above 255 to white, so we take the high byte there too (the one place we
  differ from a plain pyiqa call, which would score a saturated image);
- arrays: HxW, HxWx1, HxWx3, HxWx4 of uint8 (as is), uint16 (high byte), or float in [0, 1].

Every failure to read a file or bytes is an ImageReadError naming the input: missing, not an
image, corrupt or truncated, any error of PIL's decoders, and images larger than the pixel
limit. The limit guards against decompression bombs (a small file whose header claims, say,
20000x20000 pixels: 1.2 GB decoded) and is checked from the header, before any decoding:
`MAX_IMAGE_PIXELS` below, 89,478,485 pixels by default (PIL's own default, about 9459x9459; a
4K image has 16.8 M), set by the environment variable BANANA100_MAX_IMAGE_PIXELS (read at
import), by `set_max_image_pixels(n)`, or per call with `max_pixels=` (`load_rgb`,
`image_size`, `MetricScorer(max_image_pixels=)`, `compute(max_image_pixels=)`). PIL's own
process-wide limit (`PIL.Image.MAX_IMAGE_PIXELS`) is left as it is; while banana100 opens a file
under a higher limit of its own, PIL's is raised to it for that call.
"""

from __future__ import annotations

import io
import itertools
import os
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar, Union

import numpy as np
from PIL import Image, UnidentifiedImageError

from banana100.errors import ImageReadError
from banana100.fileio import open_regular

ImageLike = Union[str, os.PathLike, bytes, Image.Image, np.ndarray]
T = TypeVar("T")
R = TypeVar("R")

DEFAULT_MAX_IMAGE_PIXELS = 89_478_485  # PIL's default: 1024 * 1024 * 1024 // 4 // 3
MAX_IMAGE_PIXELS_ENV = "BANANA100_MAX_IMAGE_PIXELS"


def limit_from_env() -> int:
    text = os.environ.get(MAX_IMAGE_PIXELS_ENV, "").strip().replace("_", "")
    if not text:
        return DEFAULT_MAX_IMAGE_PIXELS
    try:
        value = int(float(text))
    except ValueError:
        value = 0
    if value < 1:
        raise ImageReadError(f"{MAX_IMAGE_PIXELS_ENV}={os.environ[MAX_IMAGE_PIXELS_ENV]!r}: expected a positive "
                             "number of pixels, e.g. 200000000")
    return value


# Largest width x height read from a file or bytes; see the module docstring.
MAX_IMAGE_PIXELS: int = limit_from_env()


def set_max_image_pixels(pixels: int) -> None:
    """Set the library's pixel limit for image files (default 89,478,485; see the module docstring)."""
    global MAX_IMAGE_PIXELS
    MAX_IMAGE_PIXELS = _checked_limit(pixels)


def _checked_limit(pixels) -> int:
    if isinstance(pixels, bool) or not isinstance(pixels, (int, np.integer)) or pixels < 1:
        raise ValueError(f"max_pixels must be a positive integer number of pixels, got {pixels!r}")
    return int(pixels)


_PIL_LIMIT_LOCK = threading.Lock()


def _pil_open(fp, limit: int) -> Image.Image:
    """Image.open, with PIL's own process-wide limit lifted for the call: ours is checked instead.

    PIL refuses an image over twice its limit while opening it (DecompressionBombError) and warns
    over its limit, whatever ours says. Every open takes the lock, and PIL's value is read inside
    it: read outside, a thread could see another thread's temporary value and open after it was
    restored. Header only: the pixels are decoded later, outside the lock.
    """
    with _PIL_LIMIT_LOCK:
        saved = Image.MAX_IMAGE_PIXELS
        if saved is None:
            return Image.open(fp)
        # PIL's guard off for the call: ours checks the size from the header right after (`_opened`), with
        # a message naming the file and the limit; PIL's DecompressionBombWarning (between its limit and
        # twice it) came out as a bare "could be decompression bomb DOS attack" warning beside ours
        Image.MAX_IMAGE_PIXELS = None
        try:
            return Image.open(fp)
        finally:
            Image.MAX_IMAGE_PIXELS = saved


def _too_large(name: str, size: str, limit: int) -> ImageReadError:
    return ImageReadError(
        f"{name}: {size} exceeds the image size limit of {limit:,} pixels (a guard against "
        f"decompression bombs); if the file is trusted, raise the limit with "
        f"{MAX_IMAGE_PIXELS_ENV}=N, banana100.imageio.set_max_image_pixels(N) or max_image_pixels=N"
    )


def describe(source: ImageLike) -> str:
    """A short name for an input, for error messages."""
    if isinstance(source, (str, os.PathLike)):
        return str(source)
    if isinstance(source, bytes):
        return f"<{len(source)} bytes>"
    if isinstance(source, Image.Image):
        return f"<PIL image {source.mode} {source.size[0]}x{source.size[1]}>"
    if isinstance(source, np.ndarray):
        return f"<array {source.dtype} {source.shape}>"
    return f"<{type(source).__name__}>"


def _pil_to_rgb(img: Image.Image, name: str) -> np.ndarray:
    if img.mode.startswith("I;16") or img.mode == "I":
        a = np.asarray(img).astype(np.int64)
        if img.mode != "I" or a.max() > 255:  # 16-bit data: keep the high byte
            a = a >> 8
        a = np.clip(a, 0, 255).astype(np.uint8)
        return np.repeat(a[:, :, None], 3, axis=2)
    if img.mode == "F":
        raise ImageReadError(f"{name}: floating-point image files are not supported; save as 8- or 16-bit")
    return np.asarray(img.convert("RGB"))


def _array_to_rgb(a: np.ndarray, name: str) -> np.ndarray:
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    if a.ndim != 3 or a.shape[2] not in (3, 4):
        raise ImageReadError(f"{name}: expected an HxW, HxWx1, HxWx3 or HxWx4 array")
    a = a[:, :, :3]
    if a.dtype == np.uint8:
        return np.ascontiguousarray(a)
    if a.dtype == np.uint16:
        return (a >> 8).astype(np.uint8)
    if np.issubdtype(a.dtype, np.floating):
        outside = ~((a >= 0) & (a <= 1))  # NaN too
        if outside.any():
            first = tuple(int(k) for k in np.argwhere(outside)[0])
            raise ImageReadError(f"{name}: float arrays must hold values in [0, 1]; the first value outside is "
                                 f"{float(a[first])!r} at [{first[0]}, {first[1]}, {first[2]}] (row, column, channel)")
        return np.round(a * 255).astype(np.uint8)
    raise ImageReadError(f"{name}: unsupported array dtype {a.dtype} (use uint8, uint16 or float in [0, 1])")


@contextmanager
def _opened(source: str | os.PathLike | bytes, name: str, max_pixels: int | None = None):
    """`source` opened as a lazy PIL image (header read, pixels not yet), its size checked
    against the pixel limit; every failure inside the block is an ImageReadError naming the input."""
    limit = _checked_limit(MAX_IMAGE_PIXELS if max_pixels is None else max_pixels)
    try:
        fp = io.BytesIO(source) if isinstance(source, bytes) else open_regular(source)  # a FIFO fails at once
    except FileNotFoundError:
        raise ImageReadError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ImageReadError(f"{name}: is a folder, not an image file") from None
    except OSError as e:
        raise ImageReadError(f"{name}: cannot open ({e.strerror or e})") from None
    try:
        # PIL warns (DecompressionBombWarning) only over its limit; whatever is over ours fails below
        with fp, _pil_open(fp, limit) as img:
            w, h = img.size
            if w * h > limit:
                raise _too_large(name, f"{w}x{h} pixels ({w * h:,})", limit)
            yield img
    except ImageReadError:
        raise
    except UnidentifiedImageError:
        raise ImageReadError(f"{name}: not an image file PIL can read") from None
    except Image.DecompressionBombError as e:  # PIL refuses over twice its limit before we see the size
        found = re.search(r"\((\d+) pixels\)", str(e))
        raise _too_large(name, f"{int(found.group(1)):,} pixels" if found else f"the image ({e})", limit) from None
    except MemoryError:
        raise ImageReadError(f"{name}: not enough memory to decode the image") from None
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise ImageReadError(f"{name}: corrupt or truncated image ({e})") from None
    except Exception as e:  # noqa: BLE001 - PIL's decoders raise many types on bad data
        raise ImageReadError(f"{name}: cannot decode the image ({type(e).__name__}: {e})") from None


def load_rgb(source: ImageLike, max_pixels: int | None = None) -> np.ndarray:
    """Return `source` as a contiguous HxWx3 uint8 array; ImageReadError names what failed.

    `max_pixels`: the pixel limit for a file or bytes (default `MAX_IMAGE_PIXELS`).
    """
    name = describe(source)
    if isinstance(source, np.ndarray):
        return _array_to_rgb(source, name)
    if isinstance(source, Image.Image):
        try:  # a lazily opened PIL image decodes here, and may be truncated
            return _pil_to_rgb(source, name)
        except ImageReadError:
            raise
        except Exception as e:  # noqa: BLE001 - PIL's decoders raise many types on bad data
            raise ImageReadError(f"{name}: cannot decode the image ({type(e).__name__}: {e})") from None
    if isinstance(source, (str, os.PathLike, bytes)):
        with _opened(source, name, max_pixels) as img:
            img.load()
            return _pil_to_rgb(img, name)
    raise ImageReadError(f"{name}: expected a path, bytes, a PIL image or an array")


def image_size(source: str | os.PathLike | bytes, max_pixels: int | None = None) -> tuple[int, int]:
    """(height, width) of an image file or its bytes, from the header alone (no pixel decoding).

    Missing, unreadable and non-image inputs, and images over the pixel limit (`max_pixels`,
    default `MAX_IMAGE_PIXELS`), raise ImageReadError here already; a file whose pixel data is
    truncated only fails in `load_rgb`.
    """
    name = describe(source)
    if not isinstance(source, (str, os.PathLike, bytes)):
        raise ImageReadError(f"{name}: expected a path or bytes")
    with _opened(source, name, max_pixels) as img:
        return img.size[1], img.size[0]


def encode_png(rgb: np.ndarray, compress_level: int = 1) -> bytes:
    """PNG bytes of an RGB uint8 array (level 1: chains are written often, read rarely)."""
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG", compress_level=compress_level)
    return buf.getvalue()


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def list_images(folder: str | os.PathLike) -> list[Path]:
    """Image files directly inside `folder`, sorted by name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ImageReadError(f"{folder}: no such folder")
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def decode_ahead(items: Iterable[T], decode: Callable[[T], R], workers: int, ahead: int,
                 catch: tuple[type[BaseException], ...] = (ImageReadError,)) -> Iterator[tuple[T, R | BaseException]]:
    """(item, decode(item)) for each item, in input order, while `workers` threads decode up to
    `ahead` items beyond the one handed out: decoding (PIL releases the GIL) overlaps the
    caller's scoring, and memory holds at most `ahead` decoded images. An exception of a `catch`
    type comes back in place of the result (the caller names the file); others propagate.
    `items` is drawn lazily; `workers` <= 0 decodes in this thread. The one decode-ahead of
    the library: the engine's `score` and `banana100 score` use it."""
    it = iter(items)
    if workers <= 0:
        for item in it:
            try:
                yield item, decode(item)
            except catch as e:
                yield item, e
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="banana100-decode")
    try:
        pending: deque = deque((item, pool.submit(decode, item)) for item in itertools.islice(it, max(1, ahead)))
        while pending:
            item, future = pending.popleft()
            for nxt in itertools.islice(it, 1):
                pending.append((nxt, pool.submit(decode, nxt)))
            try:
                result = future.result()
            except catch as e:
                yield item, e
            else:
                yield item, result
    finally:  # also when the caller stops early: drop what is queued, wait for what runs
        pool.shutdown(wait=True, cancel_futures=True)
