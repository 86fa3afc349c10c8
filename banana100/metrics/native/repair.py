"""pyiqa's rounding, reproduced where it decides a score: the exact-rounding repair.

In a flat window or on an exact ramp an MSCN coefficient (or a derivative filter's output) is a
rounding leftover of the local mean: its sign, which the GGD / AGGD fits count, comes from the
arithmetic, not the image. The batched primitives (`matlab`, `nss`) compute fast and in another
order; this module finds those leftovers (`leftover_bound`, the flat shares) and puts pyiqa's own
values there, computed with the arithmetic of pyiqa's whole-image `F.conv2d` calls at chosen
pixels (`conv2d_at`) or in the row strips that hold them (`conv2d_rows`). The native snapshot
(tests/metrics/native/test_native_snapshot.py) holds every score bit for bit.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from banana100.metrics.native import matlab
from banana100.metrics.native.matlab import CONV_STRIP_BYTES


# --------------------------------------------------------------------------- pyiqa's convolution at chosen pixels

def conv2d_rows(x: torch.Tensor, weight: torch.Tensor, need: torch.Tensor) -> torch.Tensor:
    """`F.conv2d(x, weight)` of one (1, C, H, W) image, bit for bit, computed only in the row
    strips of `conv2d` that hold an output row flagged in `need` (out_h,) bool; other rows are 0.

    For repairing a few areas of an image with pyiqa's own arithmetic (`repair_filtered`):
    the strips are those `conv2d` uses (tests check them against the one call), so skipping the
    strips nobody needs changes nothing in the others. Float32 kernels narrower than 5 and
    non-CPU devices take the whole call.
    """
    kh, kw = weight.shape[-2:]
    out_h = x.shape[-2] - kh + 1
    rows = max(16, CONV_STRIP_BYTES // (x.shape[1] * x.shape[-1] * x.element_size()))
    if x.device.type != "cpu" or out_h <= rows or (x.dtype != torch.float64 and min(kh, kw) < 5):
        return F.conv2d(x, weight)
    out = x.new_zeros(x.shape[0], weight.shape[0], out_h, x.shape[-1] - kw + 1)
    wanted = need.reshape(-1).tolist()
    for r in range(0, out_h, rows):
        stop = min(r + rows, out_h)
        if any(wanted[r:stop]):
            out[..., r:stop, :] = F.conv2d(x[..., r : stop + kh - 1, :], weight)
    return out




# Windows per conv2d call of `conv2d_at`: full calls of AT_CHUNK, the last one of the next power
# of two from AT_MIN_CHUNK (a photo has a few hundred leftovers: a 1024-window call for 130 of
# them cost 4x the convolution). A single window goes through other CPU code that sums in another
# order (measured in float64); calls of AT_MIN_CHUNK windows and more round as the whole-image
# call (float32 and float64, 5x5 to 11x11 windows, 1 and 2 threads: tests/metrics/native/test_native_flat.py).
AT_CHUNK = 1024
AT_MIN_CHUNK = 16


def at_chunks(count: int) -> list[tuple[int, int]]:
    """(start, windows in the call) of the `conv2d_at` calls for `count` windows."""
    calls = [(s, AT_CHUNK) for s in range(0, count - count % AT_CHUNK, AT_CHUNK)]
    if count % AT_CHUNK:
        last = max(AT_MIN_CHUNK, 1 << (count % AT_CHUNK - 1).bit_length())
        calls.append((count - count % AT_CHUNK, min(last, AT_CHUNK)))
    return calls


def conv2d_at(padded: torch.Tensor, weight: torch.Tensor, index: torch.Tensor, square: bool = False) -> torch.Tensor:
    """Outputs `F.conv2d(padded[n:n+1], weight)[0, 0, i, j]` for the rows (n, i, j) of `index` (K, 3)
    (of `padded ** 2` with `square=True`).

    `padded` is (N, 1, Hp, Wp), `weight` (1, 1, kh, kw). The K windows are laid side by side in
    one kh-row image convolved with stride (1, kw), AT_CHUNK windows a call (the last call
    padded with zero windows to `at_chunks`' size): on CPU each output then gets the same arithmetic, bit for bit,
    as in the one-image call over the whole picture that pyiqa makes (measured for float32 and
    float64, 5x5 and 7x7 windows, images from 16x16 to 2048x1536, one and two threads:
    tests/metrics/native/test_native_flat.py). Costs K windows, not the whole image.
    """
    rows = _window_rows(padded, weight, index)
    w = weight.to(padded.dtype)
    kw = weight.shape[-1]
    if not rows:
        return padded.new_zeros(0)
    return torch.cat([F.conv2d(row.mul_(row) if square else row, w, stride=(1, kw)).reshape(-1)[:k]
                      for row, k in rows])


def conv2d_at_moments(padded: torch.Tensor, weight: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(`conv2d_at(padded, weight, index)`, `conv2d_at(..., square=True)`), bit for bit, the
    windows gathered once for both and convolved in one call: each row's windows, then their
    squares, side by side (a call of twice the windows, which rounds as any other: a call costs
    ~0.1 ms of set-up on CPU whatever its size, more than a photo's few hundred windows)."""
    w = weight.to(padded.dtype)
    kw = weight.shape[-1]
    plain, squared = [], []
    for row, k in _window_rows(padded, weight, index):
        both = F.conv2d(torch.cat([row, row * row], dim=-1), w, stride=(1, kw)).reshape(2, -1)
        plain.append(both[0, :k])
        squared.append(both[1, :k])
    if not plain:
        return padded.new_zeros(0), padded.new_zeros(0)
    return torch.cat(plain), torch.cat(squared)


def _window_rows(padded: torch.Tensor, weight: torch.Tensor, index: torch.Tensor) -> list[tuple[torch.Tensor, int]]:
    """The (1, 1, kh, size * kw) rows of `conv2d_at` (sizes: `at_chunks`), with how many windows each holds: one
    gather from the flattened image per chunk (three broadcast indices cost several times more)."""
    kh, kw = weight.shape[-2:]
    hp, wp = padded.shape[-2:]
    flat = padded.reshape(-1)
    n_idx, i_idx, j_idx = index.unbind(-1)
    start = (n_idx * (padded.shape[1] * hp) + i_idx) * wp + j_idx  # each window's top-left element
    taps = (torch.arange(kh, device=padded.device)[:, None, None] * wp
            + torch.arange(kw, device=padded.device)[None, None, :])  # (kh, 1, kw)
    rows = []
    for s, size in at_chunks(index.shape[0]):
        part = start[s : s + size]
        k = part.numel()
        row = padded.new_zeros(kh, size, kw)
        row[:, :k] = flat.index_select(0, (taps + part[None, :, None]).reshape(-1)).view(kh, k, kw)
        rows.append((row.view(1, 1, kh, size * kw), k))
    return rows


# --------------------------------------------------------------------------- rounding leftovers

def leftover_bound(window: torch.Tensor, dtype: torch.dtype, peak: float = 255.0) -> float:
    """A bound, with margin, on how far two summation orders of a `window`-filtered image of
    values in [0, peak] can round apart: 4 * taps * eps * peak. Where |x - local mean| is below
    it, the MSCN coefficient is a rounding leftover (flat windows, exact ramps) whose sign is
    the arithmetic's, not the image's."""
    return 4.0 * window.numel() * torch.finfo(dtype).eps * peak


def pyiqa_mscn_at(
    x: torch.Tensor, window: torch.Tensor, padding: str, index: torch.Tensor | None, rows: torch.Tensor | None = None
) -> torch.Tensor:
    """pyiqa's `normalize_img_with_gauss` of one image x (H, W) at the pixels (i, j) of `index`
    (K, 2) -> (K,), or (index None) -> (H, W) in the row strips that hold a row flagged in `rows`
    (H,) bool (`conv2d_rows`), in x's dtype, with the arithmetic of
    pyiqa's whole-image `F.conv2d` calls: the same rounding leftovers in flat windows and on
    exact ramps. With an index only those windows are convolved (`conv2d_at`)."""
    kh, kw = window.shape[-2:]
    padded = matlab.pad_same(x[None, None], kh, kw, padding)
    weight = window.to(device=x.device, dtype=x.dtype).reshape(1, 1, kh, kw)
    if index is None:
        mu = conv2d_rows(padded, weight, rows)[0, 0]
        mean_sq = conv2d_rows(padded * padded, weight, rows)[0, 0]
        centre = x
    else:
        at = F.pad(index, (1, 0))  # image 0 of `padded`
        mu, mean_sq = conv2d_at_moments(padded, weight, at)
        centre = x[index[:, 0], index[:, 1]]
    return _pyiqa_normalized(centre, mu, mean_sq)


_LEVEL_TABLES: dict = {}
# Up to this many leftovers in an image are recomputed from their windows (`conv2d_at`,
# about 0.7 ms per 1024 on two cores); more, from the row strips that hold them (a one-channel
# conv2d of a 512x512 image: about 3 ms).
AT_WINDOWS_MAX = 4 * AT_CHUNK
# Flat windows of a non-integer image (a resampled scale) take pyiqa's value for each distinct
# value, up to this many values per batch (a resampled flat area keeps one value; more distinct
# values than this are left to the windows or strips).
FLAT_VALUES_MAX = 8


def pyiqa_mscn_levels(window: torch.Tensor, dtype: torch.dtype, device) -> torch.Tensor:
    """pyiqa's MSCN coefficient (c = 1) of a flat window at each grey level 0..255 (256,), with
    its whole-image conv2d arithmetic (`conv2d_at` on constant windows: a window's output
    depends on its values only, so a flat window's on its one value). Cached."""
    key = (window.shape, float(window.sum()), dtype, str(device))
    if key not in _LEVEL_TABLES:
        kh, kw = window.shape[-2:]
        levels = torch.arange(256, dtype=dtype, device=device)
        # 256 constant windows side by side: (1, 1, kh, 256 * kw), centres at (kh // 2, kw // 2 + k kw)
        row = levels.repeat_interleave(kw).view(1, 1, 1, -1).expand(1, 1, kh, -1).contiguous()
        index = torch.stack([torch.zeros(256, dtype=torch.long), torch.zeros(256, dtype=torch.long),
                             torch.arange(256) * kw], dim=-1).to(device)
        weight = window.to(device=device, dtype=dtype).reshape(1, 1, kh, kw)
        mu, mean_sq = conv2d_at_moments(row, weight, index)
        _LEVEL_TABLES[key] = _pyiqa_normalized(levels, mu, mean_sq)
    return _LEVEL_TABLES[key]


def flat_windows(x: torch.Tensor, size: int, padding: str = "zeros") -> torch.Tensor:
    """(N, H, W) bool: the size x size window of x (N, H, W) (`padding` as `matlab.pad_same`) is
    constant. Exact: runs of equal neighbours (no arithmetic), each row of the window along its
    row, then the rows' centres down the window's centre column. NaN is never flat."""
    r = size // 2
    h, w = x.shape[-2:]
    p = matlab.pad_same(x[:, None], size, size, padding)[:, 0]
    across = _all_runs(p[..., :, 1:] == p[..., :, :-1], size - 1, -1)  # (N, H + 2r, W): row of the window constant
    down = p[..., 1:, r : r + w] == p[..., :-1, r : r + w]  # (N, H + 2r - 1, W): centre column, next row equal
    return _all_runs(across[..., :-1, :] & down, size - 1, -2) & across[..., size - 1 :, :]


def _all_runs(b: torch.Tensor, n: int, dim: int) -> torch.Tensor:
    """out[k] = b[k] & ... & b[k + n - 1] along `dim` (by doubling spans: log2(n) steps)."""
    out, span = b, 1  # out[k] covers b[k : k + span]
    while span < n:
        step = min(span, n - span)
        out = out.narrow(dim, 0, out.shape[dim] - step) & out.narrow(dim, step, out.shape[dim] - step)
        span += step
    return out


def _put_flat_levels(structdis: torch.Tensor, x: torch.Tensor, flat: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """pyiqa's values into `structdis` at the `flat` windows of an image of 0..255 integers, by
    grey level; returns the windows done (all of `flat`)."""
    levels = pyiqa_mscn_levels(window, x.dtype, x.device).to(structdis.dtype)
    # a lookup over the whole image: index_select is several times faster than indexing by
    # a mask or by index tensors (which pay a nonzero and a slow gather); the clamp only keeps
    # the lookup of pixels outside flat windows in range (their values are not used)
    grey = x.reshape(-1).to(torch.int32).clamp_(0, levels.numel() - 1)  # int32: half the bytes of int64
    torch.where(flat, levels.index_select(0, grey).view_as(x), structdis, out=structdis)
    return flat


def _flat_value_groups(x: torch.Tensor, flat: torch.Tensor) -> tuple[list[tuple[torch.Tensor, int]], torch.Tensor]:
    """The `flat` windows of any image grouped by value (the first FLAT_VALUES_MAX distinct
    values, in the order met): per value its windows (a mask like x) and the flat position of
    one of them, whose pyiqa value all take (a constant window's output depends on its value
    only); and the windows grouped."""
    remaining = x.masked_select(flat)  # the flat windows' values (their centres')
    values = []
    while remaining.numel() and len(values) < FLAT_VALUES_MAX:
        values.append(remaining[0])
        remaining = remaining[remaining != remaining[0]]
    groups = []
    done = flat if not remaining.numel() else torch.zeros_like(flat)
    for value in values:
        same = flat & (x == value)
        groups.append((same, int(same.view(-1).view(torch.uint8).argmax())))  # its first window
        if done is not flat:
            done |= same
    return groups, done


def repair_leftovers(
    structdis: torch.Tensor, x: torch.Tensor, centred: torch.Tensor, window: torch.Tensor, padding: str,
    integers: bool = False,
) -> torch.Tensor:
    """Put pyiqa's own MSCN values (c = 1) into `structdis` (N, H, W) wherever `centred` (x minus
    the fast local mean, N, H, W) is within `leftover_bound`: there the coefficient is a rounding
    leftover and its sign, which the AGGD fits count, is decided by pyiqa's arithmetic. Where an
    image has many (a large flat area), its flat windows take pyiqa's value of a constant window:
    by grey level with `integers` (x holds 0..255 integers: `pyiqa_mscn_levels`), else by value
    (one window of each value computed with the others). The others are recomputed from their
    windows (up to AT_WINDOWS_MAX) or from the row strips that hold them. In place; returns the
    share of coefficients flagged per image (N,) float64."""
    mask = centred.abs() <= leftover_bound(window, x.dtype)
    flagged = mask.flatten(-2).sum(-1)
    share = flagged.to(torch.float64) / (x.shape[-2] * x.shape[-1])
    counts = flagged.tolist()
    if not any(counts):  # nothing flat (most photographs): one pass over the image, no more
        return share
    groups = []  # flat windows of one value, each with one window to compute
    if x.device.type == "cpu" and max(counts) > AT_CHUNK:
        # most of a large flat area: its flat windows by value, not window by window
        # grey levels compare as bytes: a quarter of the memory traffic of float32
        flat = mask & flat_windows(x.to(torch.uint8) if integers else x, window.shape[-1], padding)
        if integers:
            done = _put_flat_levels(structdis, x, flat, window)
        else:
            groups, done = _flat_value_groups(x, flat)
        mask &= ~done
        counts = mask.flatten(-2).sum(-1).tolist()
    few = mask
    for n, count in enumerate(counts):
        if count > AT_WINDOWS_MAX:  # many: from the row strips that hold them, image by image
            exact = pyiqa_mscn_at(x[n], window, padding, None, mask[n].any(-1)).to(structdis.dtype)
            torch.where(mask[n], exact, structdis[n], out=structdis[n])
            if few is mask:
                few = mask.clone()
            few[n] = False
    if any(0 < c <= AT_WINDOWS_MAX for c in counts) or groups:
        # the others from their windows, all images of the batch in the same calls, and one
        # window of each flat value with them
        h, w = x.shape[-2:]
        at = true_positions(few, sum(c for c in counts if c <= AT_WINDOWS_MAX))
        at = torch.cat([at, torch.tensor([first for _, first in groups], dtype=at.dtype, device=at.device)])
        index = torch.stack([at // (h * w), at // w % h, at % w], dim=-1)  # (K, 3): image, row, column
        kh, kw = window.shape[-2:]
        padded = matlab.pad_same(x[:, None], kh, kw, padding)
        weight = window.to(device=x.device, dtype=x.dtype).reshape(1, 1, kh, kw)
        mu, mean_sq = conv2d_at_moments(padded, weight, index)
        value = _pyiqa_normalized(x.reshape(-1).index_select(0, at), mu, mean_sq).to(structdis.dtype)
        for (same, _), flat_value in zip(groups, value[value.numel() - len(groups) :], strict=True):
            structdis.masked_fill_(same, flat_value)
        at, value = at[: at.numel() - len(groups)], value[: value.numel() - len(groups)]
        if structdis.is_contiguous():
            structdis.view(-1).index_copy_(0, at, value)
        else:
            n, i, j = index[: at.numel()].unbind(-1)
            structdis[n, i, j] = value
    return share


def true_positions(mask: torch.Tensor, count: int) -> torch.Tensor:
    """The flat positions of the `count` True values of a bool `mask`, ascending, as
    `mask.reshape(-1).nonzero()[:, 0]`. A sparse mask on CPU is searched 8 bytes at a time: the
    nonzero words first, then their bytes (nonzero over every byte of a 512x512 mask costs as
    much as the convolutions of the repair when only a few hundred values are set)."""
    flat = mask.reshape(-1)
    if flat.device.type != "cpu" or flat.numel() % 8 or count * 64 > flat.numel():
        return flat.nonzero()[:, 0]
    words = flat.view(torch.int64).nonzero()[:, 0]
    candidates = (words[:, None] * 8 + torch.arange(8)).reshape(-1)
    return candidates[flat.index_select(0, candidates)]


def _pyiqa_normalized(centre: torch.Tensor, mu: torch.Tensor, mean_sq: torch.Tensor) -> torch.Tensor:
    """pyiqa's (x - mu) / (sigma + 1), sigma its safe_sqrt with its dtype's eps."""
    sigma = torch.sqrt((mean_sq - mu**2).abs() + torch.finfo(mu.dtype).eps)
    return (centre - mu) / (sigma + 1)


# Above this share of a map's values, `repair_filtered` convolves the row strips that hold them
# rather than each window: a float64 11x11 window costs ~0.4-1.4 us in `conv2d_at`, a pixel of
# the strips ~0.13-0.7 us (one thread; bench/metrics/bench_repair_paths.py).
FILTERED_WINDOWS_SHARE = 0.25


def repair_filtered(out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, padding: str, bound: float) -> torch.Tensor:
    """Put pyiqa's own `F.conv2d` outputs (correlation with `weight`, `padding`) of the maps x
    (N, H, W) into `out` (N, H, W, the same filter computed another way) wherever |out| <= bound:
    rounding leftovers of a kernel summing to zero (a derivative on a flat window), whose signs
    the AGGD fits count. Window by window (`conv2d_at`) unless a map has more than
    FILTERED_WINDOWS_SHARE of its values to repair: on IL-NIQE's flat frames (~4,000-5,000 values
    a map) its float64 11x11 windows took x0.012-0.027 of the time of the row strips that hold
    them (bench/metrics/bench_repair_paths.py).
    In place; returns the share of values repaired per map (N,) float64."""
    kh, kw = weight.shape[-2:]
    w4 = weight.to(device=x.device, dtype=x.dtype).reshape(1, 1, kh, kw)
    mask = out.abs() <= bound
    counts = mask.flatten(-2).sum(-1).tolist()
    for n, count in enumerate(counts):
        if not count:
            continue
        padded = matlab.pad_same(x[n][None, None], kh, kw, padding)
        if count > FILTERED_WINDOWS_SHARE * x.shape[-2] * x.shape[-1]:
            exact = conv2d_rows(padded, w4, mask[n].any(-1))[0, 0]
            torch.where(mask[n], exact.to(out.dtype), out[n], out=out[n])
        else:
            index = mask[n].nonzero()
            out[n, index[:, 0], index[:, 1]] = conv2d_at(padded, w4, F.pad(index, (1, 0))).to(out.dtype)
    return torch.tensor(counts, dtype=torch.float64) / (x.shape[-2] * x.shape[-1])


def leftover_share(y: torch.Tensor, size: int = 7, sigma: float = 7 / 6, padding: str = "replicate") -> torch.Tensor:
    """Share of the pixels of luminance maps y (B, H, W) (0-255 scale) whose size x size Gaussian
    window has a local mean equal to the pixel within `leftover_bound`: flat windows and exact
    ramps, where MSCN coefficients are rounding leftovers -> (B,) float64.

    The regime in which a score depends on the arithmetic (pyiqa's own scores move with its
    convolution backend there, the original MATLAB ones cannot be reproduced exactly; see the
    metric cards). One float32 separable pass: cheap next to any of the metrics; a metric that
    filters y with that window itself passes its own y - mean to `centred_share` instead."""
    y32 = y.to(torch.float32)
    mu = matlab.imfilter_symmetric_separable(y32, matlab.gaussian_1d(size, sigma).to(y.device), padding)
    return centred_share(torch.sub(y32, mu, out=mu), size, sigma)


def centred_share(centred: torch.Tensor, size: int = 7, sigma: float = 7 / 6) -> torch.Tensor:
    """`leftover_share` from y minus its local mean (B, H, W) under the same window and padding,
    for a metric that computes it anyway (PIQE, NIQE, BRISQUE's official mode): no second
    filtering. Near-flat windows (one pixel a grey level off) sit near the bound, so another
    filtering's arithmetic flips a few of them: against the separate pass, at most 2.9e-4 of
    the share (PIQE, 77 of 262,144 pixels), NIQE 3.0e-5, BRISQUE 1.1e-5; 101 of 121
    image/metric/mode rows equal (bench/metrics/leftover_share_sources.py)."""
    window = matlab.fspecial_gaussian(size, sigma, float32=True)
    flagged = centred.abs() <= leftover_bound(window, torch.float32)
    if flagged.device.type == "cpu":
        # what mean gives there (a float64 sum, exact for counts, then a division), without
        # the float64 copy of the mask
        return flagged.flatten(-2).sum(-1).to(torch.float64) / (flagged.shape[-2] * flagged.shape[-1])
    return flagged.flatten(-2).to(torch.float64).mean(-1)
