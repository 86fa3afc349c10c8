"""Natural-scene-statistics building blocks shared by NIQE, BRISQUE and their relatives.

MSCN coefficients, the moment-matching GGD / AGGD fits of the LIVE releases (a lookup over the
shape grid 0.2:0.001:10), paired products and block (patch) views. Everything is batched over
leading dimensions: a fit takes `(..., n)` samples and returns `(...)` parameters, so the
patches of all images of a batch are fitted in one call.
"""

from __future__ import annotations

import torch

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
            shares.append(self._share)
        self.last_flat_share = torch.cat(shares)
        return torch.cat(scores)


def signed_moments(x: torch.Tensor) -> torch.Tensor:
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
    """`signed_moments` of `(..., H, W)` maps over their last two axes -> (5, ...) float64, for
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
    """`estimate_ggd` from the (5, ...) signed moments of n samples (`signed_moments` layout)."""
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
    """`estimate_aggd` from the (5, ...) signed moments of n samples (`signed_moments` layout)."""
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
    return ggd_from_moments(signed_moments(x), x.shape[-1])


def estimate_aggd(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Zero-mode AGGD fit of the samples on the last axis -> (alpha, left_std, right_std), each (...).

    LIVE `estimateaggdparam`. left_std / right_std are the root mean squares of the negative /
    positive samples (NaN when there are none, as MATLAB's mean of an empty vector); multiply
    by `gamma_ratio_sqrt(alpha)` for the AGGD scales beta_l / beta_r.
    """
    return aggd_from_moments(signed_moments(x), x.shape[-1])


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
