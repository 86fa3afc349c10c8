"""Feeding the device: uint8 batches uploaded once, converted to float and checked for uniform
images there.

On one H200 the engine spent 26-92 % of its time at 2K on host work (float conversion on the CPU,
a synchronous upload, a wait per batch; issue 30). Here a batch travels as uint8 (a quarter of
float32's bytes), through pinned memory and a side CUDA stream, so the copy of batch k+1 runs
while batch k is computed; the float conversion and the uniform-image check run on the device.
On CPU the same calls run in the same order, synchronously.

    uploader = Uploader(device)
    batch = uploader.upload([rgb, rgb, ...])   # Uploaded: BxHxWx3 uint8 on the device
    x = to_float(batch.pixels)                 # Bx3xHxW float32 in [0, 1], what to_tensor gives
    batch.colours()                            # [None or (r, g, b) per image]

The uniform check starts on the host, while the images are copied into the upload buffer: an
image whose first pixels differ (nearly every real image) is not uniform, with no device work and
no wait. Only the others are checked in full on the device, a wait for that copy. So an ordinary
batch's host work is the copy alone, and batch k+1 is queued while batch k still computes.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

import numpy as np
import torch

from banana100.imageio import decode_ahead

T = TypeVar("T")

# images whose first pixels all agree are checked in full (nearly every real image differs early)
_PREFIX_PIXELS = 4096
# batches uploaded ahead of the compute stream at most: bounds the device memory they hold
_LEAD = 2


def to_tensor(rgb: np.ndarray) -> torch.Tensor:
    """HxWx3 uint8 -> 3xHxW float32 in [0, 1]; bit-for-bit what `TF.to_tensor` gives pyiqa."""
    if not rgb.flags.writeable:  # arrays from PIL are read-only; torch warns on those
        rgb = rgb.copy()
    return torch.from_numpy(rgb).permute(2, 0, 1).contiguous().to(torch.float32).div(255)


@functools.cache
def _levels(device: torch.device) -> torch.Tensor:
    """The 256 float32 values of uint8 / 255 as the CPU divides them (to_tensor's), on `device`.

    CUDA divides a tensor by a Python scalar as a product with its reciprocal, which can differ
    from the CPU's quotient in the last bit; a table look-up gives the CPU's values everywhere.
    """
    return torch.arange(256, dtype=torch.float32).div(255).to(device)


def to_float(pixels: torch.Tensor) -> torch.Tensor:
    """BxHxWx3 uint8 (on any device) -> Bx3xHxW contiguous float32 in [0, 1], bit for bit
    `torch.stack([to_tensor(image) for image in batch])`."""
    b, h, w, c = pixels.shape
    if pixels.device.type == "cpu":
        x = torch.empty((b, c, h, w), dtype=torch.float32)
        x.copy_(pixels.permute(0, 3, 1, 2))  # the cast is exact; div_ is to_tensor's division
        return x.div_(255)
    return look_up(pixels)


def look_up(pixels: torch.Tensor) -> torch.Tensor:
    """`to_float` off the CPU: each uint8 level's float32 value from the CPU's table."""
    b, h, w, c = pixels.shape
    index = pixels.permute(0, 3, 1, 2).contiguous().reshape(-1).to(torch.int32)
    return _levels(pixels.device).index_select(0, index).view(b, c, h, w)


def may_be_uniform(rgb: np.ndarray) -> bool:
    """False when the first pixels of an HxWx3 uint8 array differ (it is not uniform): a look at
    `_PREFIX_PIXELS` pixels on the host, microseconds; True means "check it in full"."""
    flat = rgb.reshape(-1, rgb.shape[-1])
    return bool((flat[:_PREFIX_PIXELS] == flat[0]).all())


def uniform_colours(pixels: torch.Tensor) -> list[tuple[int, int, int] | None]:
    """Per image of a BxHxWx3 uint8 batch: its colour when every pixel is the same, else None."""
    b = pixels.shape[0]
    flat = pixels.reshape(b, -1, pixels.shape[-1])
    first = flat[:, :1]
    if pixels.device.type == "cpu":  # a look at the first pixels first: a full pass costs on CPU
        same = (flat[:, :_PREFIX_PIXELS] == first).flatten(1).all(dim=1)
        for j in same.nonzero().flatten().tolist():
            same[j] = bool((flat[j] == first[j]).all())
    else:  # one pass over the batch; a GPU reads it in microseconds
        same = (flat == first).flatten(1).all(dim=1)
    packed = torch.cat([same[:, None].to(torch.uint8), first[:, 0]], dim=1).cpu().tolist()
    return [tuple(row[1:]) if row[0] else None for row in packed]


class Uploaded:
    """A batch of same-size images on the device: `pixels` (BxHxWx3 uint8) and `colours()`, the
    uniform-image check, computed once on first request for the batch a part was taken from and
    shared by every part and every metric.

    On CUDA the copy runs on the uploader's side stream, possibly issued from another thread
    (`Uploader.ahead`): reading `pixels` makes the reading thread's current stream wait for the
    copy first (a device-side wait, the host goes on), so no caller can read it early."""

    def __init__(self, pixels: torch.Tensor, stream=None, parent: tuple["Uploaded", list[int]] | None = None,
                 candidates: list[int] | None = None, ready=None):
        self._pixels = pixels
        self._stream = stream
        self._parent = parent  # (the batch this one was taken from, the positions taken)
        # the images the host's prefix look could not rule out (None: not looked, check all)
        self._candidates = candidates
        self._ready = ready  # CUDA event recorded after the copy (None: nothing to wait for)
        self._waited: set[int] = set()  # the streams already made to wait for it
        self._colours: list | None = None

    @property
    def pixels(self) -> torch.Tensor:
        if self._ready is not None:
            current = torch.cuda.current_stream(self._pixels.device)
            if current.stream_id not in self._waited:
                current.wait_event(self._ready)
                self._pixels.record_stream(current)  # the allocator keeps it until that stream is done
                self._waited.add(current.stream_id)
        return self._pixels

    def __len__(self) -> int:
        return self._pixels.shape[0]

    def colours(self) -> list[tuple[int, int, int] | None]:
        if self._colours is None:
            if self._parent is not None:
                whole, positions = self._parent
                self._colours = [whole.colours()[j] for j in positions]
            elif self._stream is None:
                self._colours = self._check()
            else:  # on the copy's stream: waits for this copy only, not for the batches computing
                with torch.cuda.stream(self._stream):
                    self._colours = self._check()
        return self._colours

    def _check(self) -> list[tuple[int, int, int] | None]:
        candidates = list(range(len(self))) if self._candidates is None else self._candidates
        colours: list[tuple[int, int, int] | None] = [None] * len(self)
        if not candidates:  # every image ruled out on the host: no device work, no wait
            return colours
        pixels = self.pixels
        if len(candidates) != len(self):
            pixels = pixels[torch.tensor(candidates, dtype=torch.long, device=pixels.device)]
        for j, colour in zip(candidates, uniform_colours(pixels), strict=True):
            colours[j] = colour
        return colours

    def take(self, positions: Sequence[int]) -> "Uploaded":
        """The images at `positions` as a batch of their own (a view when they are consecutive)."""
        positions = list(positions)
        if positions == list(range(len(self))):
            return self
        pixels = self.pixels  # waited for on this thread's stream, where the view or gather is used
        if positions and positions == list(range(positions[0], positions[0] + len(positions))):
            pixels = pixels[positions[0]: positions[0] + len(positions)]
        else:
            pixels = pixels[torch.tensor(positions, dtype=torch.long, device=pixels.device)]
        return Uploaded(pixels, self._stream, (self, positions))


class Uploader:
    """Uploads uint8 batches to `device`: on CUDA from pinned memory, non-blocking, on a side
    stream (batch k+1's copy overlaps batch k's compute); at most `_LEAD` batches ahead of the
    compute stream. Elsewhere a plain copy. `ahead` does the host's part in a thread."""

    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self._cuda = self.device.type == "cuda"
        self._stream = torch.cuda.Stream(self.device) if self._cuda else None
        self._queued: collections.deque = collections.deque()

    def upload(self, rgbs: Sequence[np.ndarray]) -> Uploaded:
        """`rgbs` (same-size HxWx3 uint8 arrays) as one batch on the device."""
        if self._cuda:  # a new thread's current device is cuda:0: pinning memory there would open a
            with torch.cuda.device(self.device):  # context on GPU 0 in every process of a launcher
                return self._upload(rgbs)
        return self._upload(rgbs)

    def _upload(self, rgbs: Sequence[np.ndarray]) -> Uploaded:
        h, w, c = rgbs[0].shape
        host = torch.empty((len(rgbs), h, w, c), dtype=torch.uint8, pin_memory=self._cuda)
        view = host.numpy()
        candidates = []
        for j, rgb in enumerate(rgbs):  # one copy per image, straight into the (pinned) buffer
            view[j] = rgb
            if may_be_uniform(rgb):
                candidates.append(j)
        if not self._cuda:
            return Uploaded(host if self.device.type == "cpu" else host.to(self.device), candidates=candidates)
        while len(self._queued) >= _LEAD:  # the compute stream is far enough ahead: wait for it
            self._queued.popleft().synchronize()
        with torch.cuda.stream(self._stream):
            pixels = host.to(self.device, non_blocking=True)
            ready = torch.cuda.Event()
            ready.record(self._stream)
        return Uploaded(pixels, self._stream, candidates=candidates, ready=ready)

    def ahead(self, chunks: Iterable[tuple[T, Sequence[np.ndarray]]]) -> Iterator[tuple[T, Uploaded]]:
        """(key, uploaded batch) for each (key, arrays) of `chunks`, in order, the next batch's
        copy into the upload buffer and its upload done by a thread while the caller computes
        the current one. A forward that waits for the device mid-way (a data-dependent step of
        a native metric) would otherwise leave the device idle during the host's copy."""
        for (key, _), batch in decode_ahead(chunks, lambda chunk: self.upload(chunk[1]), workers=1, ahead=1, catch=()):
            yield key, batch

    def queued(self) -> None:
        """Note that a batch's work is queued on the compute stream (bounds the lead)."""
        if self._cuda:
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self.device))
            self._queued.append(event)
