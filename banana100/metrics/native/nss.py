"""Natural-scene-statistics building blocks shared by NIQE, BRISQUE and their relatives.

MSCN coefficients, the moment-matching GGD / AGGD fits of the LIVE releases (a lookup over the
shape grid 0.2:0.001:10), paired products and block (patch) views. Everything is batched over
leading dimensions: a fit takes `(..., n)` samples and returns `(...)` parameters, so the
patches of all images of a batch are fitted in one call.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from banana100.metrics.native import matlab

# The shape grid of the LIVE estimators: MATLAB's 0.2:0.001:10 (9801 values).
GRID_SIZE = 9801


def shape_grid(device=None, dtype=torch.float64) -> torch.Tensor:
    """The candidate shape parameters 0.2, 0.201, ..., 10."""
    return 0.2 + 0.001 * torch.arange(GRID_SIZE, device=device, dtype=dtype)


def _aggd_ratio(gam: torch.Tensor) -> torch.Tensor:
    """Gamma(2/g)^2 / (Gamma(1/g) Gamma(3/g)): increasing in g."""
    return torch.exp(
        2 * torch.lgamma(2 / gam) - torch.lgamma(1 / gam) - torch.lgamma(3 / gam)
    )


_TABLES: dict = {}


def _tables(device, dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(grid, AGGD ratio table, reversed GGD ratio table) on `device`, cached."""
    key = (str(device), dtype)
    if key not in _TABLES:
        gam = shape_grid(device, dtype)
        aggd = _aggd_ratio(gam)
        _TABLES[key] = (gam, aggd, (1 / aggd).flip(0))
    return _TABLES[key]


def _nearest(table: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Index of the entry of the increasing `table` nearest to each value (argmin |table - v|).

    As argmin: the first index wins a tie, and a NaN value gives index 0 (MATLAB's min of an
    all-NaN vector and torch's argmin both answer the first position).
    """
    flat = values.reshape(-1).contiguous()
    upper = torch.searchsorted(table, flat).clamp(1, table.numel() - 1)
    lower = upper - 1
    take_lower = (flat - table[lower]).abs() <= (table[upper] - flat).abs()
    idx = torch.where(take_lower, lower, upper)
    idx = torch.where(torch.isnan(flat), torch.zeros_like(idx), idx)
    return idx.reshape(values.shape)


def gamma_ratio_sqrt(alpha: torch.Tensor) -> torch.Tensor:
    """sqrt(Gamma(1/a) / Gamma(3/a)): turns a standard deviation into the GGD/AGGD scale beta."""
    return torch.exp(0.5 * (torch.lgamma(1 / alpha) - torch.lgamma(3 / alpha)))


# Elements per chunk of the moment sums on CPU: large temporaries cost more in page faults than
# the arithmetic, so the sums run over cache-sized pieces.
_CPU_CHUNK = 1 << 18
_CPU_ROWS_CHUNK = 1 << 18


def images_per_chunk(x: torch.Tensor, pixels: int = 1 << 21) -> int:
    """How many images of the batch x (B, C, H, W) to score at a time: all on a GPU, about
    `pixels` worth on CPU (scores do not depend on the batch, and there large temporaries
    cost more in page faults than the arithmetic)."""
    if x.device.type != "cpu":
        return max(1, x.shape[0])
    return max(1, pixels // (x.shape[-2] * x.shape[-1]))


class ChunkedScoring(torch.nn.Module):
    """`forward` for a metric that scores a batch a piece at a time (`images_per_chunk` of
    `chunk_pixels`): its `score(part)` returns the piece's scores and leaves the piece's flat
    shares in `_share`; `last_flat_share` (B,) then holds the whole batch's."""

    chunk_pixels = 1 << 21

    def __init__(self) -> None:
        super().__init__()
        self._share: torch.Tensor | None = None
        self.last_flat_share: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores, shares = [], []
        for part in x.split(images_per_chunk(x, self.chunk_pixels)):
            scores.append(self.score(part))
            shares.append(self._share.cpu())
        self.last_flat_share = torch.cat(shares)
        return torch.cat(scores)


def _signed_moments(x: torch.Tensor) -> torch.Tensor:
    """Sums over the last axis of x (..., n) -> (5, ...): negatives' squares, positives' squares,
    negative count, positive count, sum of |x|."""
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    out = torch.zeros(5, rows.shape[0], dtype=x.dtype, device=x.device)
    chunk = _CPU_CHUNK if x.device.type == "cpu" else rows.numel() + 1
    row_step = max(1, chunk // n)
    col_step = min(n, chunk)
    for r0 in range(0, rows.shape[0], row_step):
        acc = out[:, r0 : r0 + row_step]
        for c0 in range(0, n, col_step):
            part = rows[r0 : r0 + row_step, c0 : c0 + col_step]
            neg = part.clamp(max=0)
            pos = part.clamp(min=0)
            acc[0] += (neg.unsqueeze(-2) @ neg.unsqueeze(-1)).view(-1)
            acc[1] += (pos.unsqueeze(-2) @ pos.unsqueeze(-1)).view(-1)
            acc[2] += (part < 0).sum(dim=-1)
            acc[3] += (part > 0).sum(dim=-1)
            acc[4] += pos.sum(dim=-1) - neg.sum(dim=-1)
    return out.view(5, *x.shape[:-1])


def signed_moments_rows(x: torch.Tensor) -> torch.Tensor:
    """`_signed_moments` of `(..., H, W)` maps over their last two axes -> (5, ...) float64, for
    float32 maps: negatives' squares, positives' squares, negative count, positive count, sum of |x|.

    Few passes: the negative parts, positive parts and signs of a block of rows go into one
    buffer whose row sums, before and after squaring, hold everything (on CPU the blocks are
    about `_CPU_ROWS_CHUNK` values and the buffer is reused: fresh large buffers cost more in
    page faults than the arithmetic). Each row is summed in x's dtype by torch's pairwise
    reduction (one thread per row: a map's sums do not depend on its batch), and the row sums
    are added in float64.
    """
    *lead, h, w = x.shape
    rows = x.reshape(-1, w)
    n_rows = rows.shape[0]
    step = max(1, _CPU_ROWS_CHUNK // w) if x.device.type == "cpu" else n_rows
    buffer = torch.empty(3, min(step, n_rows), w, dtype=x.dtype, device=x.device)
    row_sums = []  # per block: (2, 3, rows): sums of (neg, pos, sign), then of their squares
    for r0 in range(0, n_rows, step):
        block = rows[r0 : r0 + step]
        parts = buffer[:, : block.shape[0]]
        torch.clamp(block, max=0, out=parts[0])
        torch.clamp(block, min=0, out=parts[1])
        torch.sign(block, out=parts[2])
        row_sums.append(torch.stack([parts.sum(dim=-1), parts.square_().sum(dim=-1)]))
    sums = torch.cat(row_sums, dim=-1).to(torch.float64).view(2, 3, *lead, h).sum(dim=-1)
    (neg_sum, pos_sum, balance), (left_sq, right_sq, nonzero) = sums
    # balance = positives - negatives, nonzero = positives + negatives
    return torch.stack(
        [left_sq, right_sq, (nonzero - balance) / 2, (nonzero + balance) / 2, pos_sum - neg_sum]
    )


def ggd_from_moments(moments: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`estimate_ggd` from the (5, ...) signed moments of n samples (`_signed_moments` layout)."""
    left_sq, right_sq, _, _, abs_sum = moments
    mean_sq = (left_sq + right_sq) / n
    rho = mean_sq / (abs_sum / n).pow(2)
    gam, _, ggd_reversed = _tables(moments.device, moments.dtype)
    # the GGD ratio is 1/_aggd_ratio, decreasing in g: search the reversed (increasing) table.
    # |rho - 1/r| ties are measure-zero; the reversed search prefers the larger g on a tie.
    idx = GRID_SIZE - 1 - _nearest(ggd_reversed, rho)
    idx = torch.where(torch.isnan(rho), torch.zeros_like(idx), idx)
    return gam[idx], mean_sq


def aggd_from_moments(moments: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`estimate_aggd` from the (5, ...) signed moments of n samples (`_signed_moments` layout)."""
    left_sq, right_sq, n_left, n_right, abs_sum = moments
    left_std = torch.sqrt(left_sq / n_left)
    right_std = torch.sqrt(right_sq / n_right)
    gammahat = left_std / right_std
    rhat = (abs_sum / n).pow(2) / ((left_sq + right_sq) / n)
    rhatnorm = (
        rhat * (gammahat.pow(3) + 1) * (gammahat + 1) / (gammahat.pow(2) + 1).pow(2)
    )
    gam, aggd_table, _ = _tables(moments.device, moments.dtype)
    alpha = gam[_nearest(aggd_table, rhatnorm)]
    return alpha, left_std, right_std


def estimate_ggd(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero-mean GGD fit of the samples on the last axis -> (alpha, mean square) of shape (...).

    LIVE `estimateggdparam`: rho = E[x^2] / E[|x|]^2 matched to Gamma(1/a)Gamma(3/a)/Gamma(2/a)^2.
    """
    return ggd_from_moments(_signed_moments(x), x.shape[-1])


def estimate_aggd(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Zero-mode AGGD fit of the samples on the last axis -> (alpha, left_std, right_std), each (...).

    LIVE `estimateaggdparam`. left_std / right_std are the root mean squares of the negative /
    positive samples (NaN when there are none, as MATLAB's mean of an empty vector); multiply
    by `gamma_ratio_sqrt(alpha)` for the AGGD scales beta_l / beta_r.
    """
    return aggd_from_moments(_signed_moments(x), x.shape[-1])


def mscn(
    x: torch.Tensor,
    window: torch.Tensor,
    padding: str,
    *,
    c: float = 1.0,
    sigma_eps: float = 0.0,
    filtering: str = "conv",
    with_centred: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Mean-subtracted contrast-normalised coefficients of `(..., H, W)` images.

    (x - mu) / (sigma + c) with mu, sigma the local mean and deviation under the 2-D `window`,
    filtered as MATLAB's imfilter with `padding`; sigma = sqrt(|E[x^2] - mu^2| + sigma_eps)
    (pyiqa adds float64 eps). In structure-free areas (flat, linear ramps) the coefficients are
    rounding-sized, and their signs feed the AGGD fits, so how the filter is computed matters:

    - "conv": a float64 2-D convolution (what pyiqa does);
    - "exact_uint8": x holds integers in [0, 255]: exact, fast, bit-for-bit "conv" for a
      symmetric float32-valued window (`matlab.imfilter_moments_integer`);
    - "near_separable": rank-1 passes plus a float32 residual pass, same window values, fast
      (`matlab.imfilter_near_separable`).

    `with_centred` also returns x - mu (the same values the coefficients divide), for
    `repair_leftovers`, which would otherwise filter the image again.
    """
    if filtering == "exact_uint8":
        mu, mean_sq = matlab.imfilter_moments_integer(x, window, padding)
    elif filtering == "near_separable":
        mu = matlab.imfilter_near_separable(x, window, padding)
        mean_sq = matlab.imfilter_near_separable(x * x, window, padding)
    elif filtering == "conv":
        mu = matlab.imfilter(x, window, padding)
        mean_sq = matlab.imfilter(x * x, window, padding)
    else:
        raise ValueError(
            f"filtering must be 'conv', 'exact_uint8' or 'near_separable', got {filtering!r}"
        )
    # in place on our own temporaries: same operations and rounding, fewer large allocations
    sigma = mean_sq.sub_(mu * mu).abs_().add_(sigma_eps).sqrt_().add_(c)
    if with_centred:
        centred = x - mu
        return torch.div(centred, sigma, out=mu), centred
    return torch.sub(x, mu, out=mu).div_(sigma)


# The four neighbour directions of the paired products, as MATLAB circshift offsets.
NIQE_SHIFTS = ((0, 1), (1, 0), (1, 1), (1, -1))
BRISQUE_SHIFTS = ((0, 1), (1, 0), (1, 1), (-1, 1))


def _wrapped_segments(n: int, shift: int) -> list[tuple[int, int, int]]:
    """(start, stop, source start) runs of i -> (i - shift) mod n, each without a wrap."""
    shift %= n
    if shift == 0:
        return [(0, n, 0)]
    return [(0, shift, n - shift), (shift, n, 0)]


def paired_products(x: torch.Tensor, shifts=NIQE_SHIFTS) -> torch.Tensor:
    """x * circshift(x, shift) over the last two axes, stacked on a new axis -3: (..., S, H, W).

    Written straight into one output by slices (torch.roll copies the whole tensor per shift).
    """
    h, w = x.shape[-2:]
    out = torch.empty(*x.shape[:-2], len(shifts), h, w, dtype=x.dtype, device=x.device)
    for k, (dy, dx) in enumerate(shifts):
        for r0, r1, sr in _wrapped_segments(h, dy):
            for c0, c1, sc in _wrapped_segments(w, dx):
                torch.mul(
                    x[..., r0:r1, c0:c1],
                    x[..., sr : sr + r1 - r0, sc : sc + c1 - c0],
                    out=out[..., k, r0:r1, c0:c1],
                )
    return out


def blocks(x: torch.Tensor, bh: int, bw: int) -> torch.Tensor:
    """Distinct bh x bw blocks of `(..., H, W)` (H, W multiples of the block) -> (..., nblocks, bh, bw).

    Blocks are listed column by column (MATLAB's blkproc order).
    """
    *lead, h, w = x.shape
    nh, nw = h // bh, w // bw
    t = x.reshape(*lead, nh, bh, nw, bw).transpose(-3, -2)  # (..., nh, nw, bh, bw)
    t = t.transpose(-4, -3)  # (..., nw, nh, bh, bw): column-major block order
    return t.reshape(*lead, nh * nw, bh, bw)


def nanmean_rows(x: torch.Tensor) -> torch.Tensor:
    """MATLAB nanmean over rows of (..., n, d): each column's mean of its non-NaN entries."""
    ok = ~torch.isnan(x)
    return torch.where(ok, x, torch.zeros_like(x)).sum(dim=-2) / ok.sum(dim=-2)


def nancov_rows(x: torch.Tensor) -> torch.Tensor:
    """MATLAB nancov of (..., n, d): covariance (n-1 normalised) of the rows without any NaN.

    A single complete row gives a zero matrix (normalised by 1), as pyiqa's `cov`.
    """
    ok = ~torch.isnan(x).any(dim=-1, keepdim=True)
    n = ok.sum(dim=-2, keepdim=True).to(x.dtype)
    xz = torch.where(ok, x, torch.zeros_like(x))
    mean = xz.sum(dim=-2, keepdim=True) / n
    centred = torch.where(ok, x - mean, torch.zeros_like(x))
    return centred.transpose(-1, -2) @ centred / (n - 1).clamp(min=1)


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
    (H,) bool (`matlab.conv2d_rows`), in x's dtype, with the arithmetic of
    pyiqa's whole-image `F.conv2d` calls: the same rounding leftovers in flat windows and on
    exact ramps. With an index only those windows are convolved (`matlab.conv2d_at`)."""
    kh, kw = window.shape[-2:]
    padded = matlab.pad_same(x[None, None], kh, kw, padding)
    weight = window.to(device=x.device, dtype=x.dtype).reshape(1, 1, kh, kw)
    if index is None:
        mu = matlab.conv2d_rows(padded, weight, rows)[0, 0]
        mean_sq = matlab.conv2d_rows(padded * padded, weight, rows)[0, 0]
        centre = x
    else:
        at = F.pad(index, (1, 0))  # image 0 of `padded`
        mu, mean_sq = matlab.conv2d_at_moments(padded, weight, at)
        centre = x[index[:, 0], index[:, 1]]
    return _pyiqa_normalized(centre, mu, mean_sq)


_LEVEL_TABLES: dict = {}
# Up to this many leftovers in an image are recomputed from their windows (`matlab.conv2d_at`,
# about 0.7 ms per 1024 on two cores); more, from the row strips that hold them (a one-channel
# conv2d of a 512x512 image: about 3 ms).
AT_WINDOWS_MAX = 4 * matlab.AT_CHUNK
# Flat windows of a non-integer image (a resampled scale) take pyiqa's value for each distinct
# value, up to this many values per batch (a resampled flat area keeps one value; more distinct
# values than this are left to the windows or strips).
FLAT_VALUES_MAX = 8


def pyiqa_mscn_levels(window: torch.Tensor, dtype: torch.dtype, device) -> torch.Tensor:
    """pyiqa's MSCN coefficient (c = 1) of a flat window at each grey level 0..255 (256,), with
    its whole-image conv2d arithmetic (`matlab.conv2d_at` on constant windows: a window's output
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
        mu, mean_sq = matlab.conv2d_at_moments(row, weight, index)
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
    if x.device.type == "cpu" and max(counts) > matlab.AT_CHUNK:
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
        mu, mean_sq = matlab.conv2d_at_moments(padded, weight, index)
        value = _pyiqa_normalized(x.reshape(-1).index_select(0, at), mu, mean_sq).to(structdis.dtype)
        for (same, _), flat_value in zip(groups, value[value.numel() - len(groups) :]):
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
# the strips ~0.13-0.7 us (one thread; bench/bench_repair_paths.py).
FILTERED_WINDOWS_SHARE = 0.25


def repair_filtered(out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, padding: str, bound: float) -> torch.Tensor:
    """Put pyiqa's own `F.conv2d` outputs (correlation with `weight`, `padding`) of the maps x
    (N, H, W) into `out` (N, H, W, the same filter computed another way) wherever |out| <= bound:
    rounding leftovers of a kernel summing to zero (a derivative on a flat window), whose signs
    the AGGD fits count. Window by window (`matlab.conv2d_at`) unless a map has more than
    FILTERED_WINDOWS_SHARE of its values to repair: on IL-NIQE's flat frames (~4,000-5,000 values
    a map) its float64 11x11 windows took x0.012-0.027 of the time of the row strips that hold
    them (bench/bench_repair_paths.py).
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
            exact = matlab.conv2d_rows(padded, w4, mask[n].any(-1))[0, 0]
            torch.where(mask[n], exact.to(out.dtype), out[n], out=out[n])
        else:
            index = mask[n].nonzero()
            out[n, index[:, 0], index[:, 1]] = matlab.conv2d_at(padded, w4, F.pad(index, (1, 0))).to(out.dtype)
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
    image/metric/mode rows equal (bench/leftover_share_sources.py)."""
    window = matlab.fspecial_gaussian(size, sigma, float32=True)
    flagged = centred.abs() <= leftover_bound(window, torch.float32)
    if flagged.device.type == "cpu":
        # what mean gives there (a float64 sum, exact for counts, then a division), without
        # the float64 copy of the mask
        return flagged.flatten(-2).sum(-1).to(torch.float64) / (flagged.shape[-2] * flagged.shape[-1])
    return flagged.flatten(-2).to(torch.float64).mean(-1)
