"""Image input: everything becomes an RGB uint8 array, the way pyiqa reads images.

pyiqa opens a file with PIL and calls `.convert("RGB")`; we do the same, so scores match:
- grayscale (L, P, 1-bit) is replicated to three channels;
- RGBA / LA lose their alpha channel (no compositing: PIL's convert drops it);
- 16-bit files: PIL reads 16-bit RGB PNGs as their high byte; for 16-bit grayscale PIL would
  clip every value above 255 to white, so we take the high byte there too (the one place we
  differ from a plain pyiqa call, which would score a saturated image);
- arrays: HxW, HxWx1, HxWx3, HxWx4 of uint8 (as is), uint16 (high byte), or float in [0, 1].
"""

from __future__ import annotations

import io
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Union

import numpy as np
from PIL import Image, UnidentifiedImageError

from .errors import ImageReadError

ImageLike = Union[str, os.PathLike, bytes, Image.Image, np.ndarray]


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
        if np.isnan(a).any() or a.min() < 0 or a.max() > 1:
            raise ImageReadError(f"{name}: float arrays must hold values in [0, 1]")
        return np.round(a * 255).astype(np.uint8)
    raise ImageReadError(f"{name}: unsupported array dtype {a.dtype} (use uint8, uint16 or float in [0, 1])")


@contextmanager
def _opened(source: str | os.PathLike | bytes, name: str):
    """`source` opened as a lazy PIL image (header read, pixels not yet); errors name the input."""
    try:
        fp = io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")
    except FileNotFoundError:
        raise ImageReadError(f"{name}: no such file") from None
    except OSError as e:
        raise ImageReadError(f"{name}: cannot open ({e.strerror})") from None
    try:
        with fp, Image.open(fp) as img:
            yield img
    except UnidentifiedImageError:
        raise ImageReadError(f"{name}: not an image file PIL can read") from None
    except (OSError, SyntaxError, ValueError) as e:
        raise ImageReadError(f"{name}: corrupt or truncated image ({e})") from None


def load_rgb(source: ImageLike) -> np.ndarray:
    """Return `source` as a contiguous HxWx3 uint8 array; ImageReadError names what failed."""
    name = describe(source)
    if isinstance(source, np.ndarray):
        return _array_to_rgb(source, name)
    if isinstance(source, Image.Image):
        return _pil_to_rgb(source, name)
    if isinstance(source, (str, os.PathLike, bytes)):
        with _opened(source, name) as img:
            img.load()
            return _pil_to_rgb(img, name)
    raise ImageReadError(f"{name}: expected a path, bytes, a PIL image or an array")


def image_size(source: str | os.PathLike | bytes) -> tuple[int, int]:
    """(height, width) of an image file or its bytes, from the header alone (no pixel decoding).

    Missing, unreadable and non-image inputs raise ImageReadError here already; a file whose
    pixel data is truncated only fails in `load_rgb`.
    """
    name = describe(source)
    if not isinstance(source, (str, os.PathLike, bytes)):
        raise ImageReadError(f"{name}: expected a path or bytes")
    with _opened(source, name) as img:
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
