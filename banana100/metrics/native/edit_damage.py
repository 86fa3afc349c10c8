"""edit_damage: a cheap, reference-free detector of what recursive editing does to an image.

Four interpretable components, each from a published definition or a degradation we can state,
each in units where 1 is a stated step of damage, summed into one score (higher = more damage):

- **grain** (8-bit levels): the noise floor. A difference-of-Gaussians band-pass (sigma 0.5 and
  2.5 px) of the luma, its energy per 16x16 tile, the mean over the flattest 10 % of tiles
  (tiles that are mostly clipped are left out), divided by the filter's white-noise gain: for
  white noise of standard deviation s on a flat area it reads s. A band-pass, unlike the
  classical white-noise estimators (wavelet MAD, Immerkaer, PCA), also sees spatially
  correlated grain. Term: grain / GRAIN_UNIT (2 levels, about where noise on a flat area
  becomes visible).
- **lattice** (correlation, 0-1): a periodic pattern in the residual, after Mi-Ripple / MIRAGE
  (arXiv 2609.11317): the largest normalised autocorrelation of the high-pass residual (luma
  minus its sigma-1 Gaussian blur) at lags from 3 to 32 px, computed on the flatter half of the
  tiles (edges would otherwise make ridges along their direction) with the residual clipped at
  3 robust standard deviations. Mi-Ripple measured about 0.05 on a source photograph and 0.07 ->
  0.25 over ten Nano Banana Pro steps. Term: max(0, lattice - 0.05) / 0.2.
- **colour_cast** (degrees): the angle between the grey-edge illuminant estimate (van de
  Weijer, Gevers, Gijsenij, "Edge-based colour constancy", IEEE TIP 2007: the mean gradient
  magnitude of each channel after a sigma-1 blur, clipped pixels left out) and neutral grey.
  Term: colour_cast / 3 (about 3 degrees is where an illuminant error becomes noticeable,
  Gijsenij et al., JOSA A 2009).
- **softness** (0-1): the blur effect of Crete et al. ("The blur effect: perception and
  estimation with a new no-reference perceptual blur metric", SPIE 2007: how little the
  differences between neighbours change when the image is blurred again by a 9-tap box), taken
  only on the strongest 5 % of edges so that grain does not read as sharpness. Term:
  max(0, softness - 0.5) / 0.1.

The constants were set from these stated reasons before any validation and were not tuned on
the simulated editor's chains (bench/validate_edit_damage.py reports, it does not fit).

`forward(x)` takes Bx3xHxW in [0, 1] (the native contract) and returns B float64 scores; after
it, `last_components` maps each component's name to a (B,) float64 tensor. A batch holds images
of one size; every statistic is per image, so batching does not change a score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import torch
import torch.nn.functional as F

COMPONENTS = ("grain", "lattice", "colour_cast", "softness")
UNITS = {  # component -> (offset, unit): term = max(0, component - offset) / unit
    "grain": (0.0, 2.0),
    "lattice": (0.05, 0.2),
    "colour_cast": (0.0, 3.0),
    "softness": (0.5, 0.1),
}
TILE = 16
FLATTEST = 0.10  # share of tiles whose band-pass energy is the noise floor
DOG_SIGMAS = (0.5, 2.5)
RESIDUAL_SIGMA = 1.0
MIN_LAG, MAX_LAG = 3, 32
EDGE_SHARE = 0.05  # strongest edges on which softness is measured
CRETE_TAPS = 9
CLIP_LOW, CLIP_HIGH = 2.0, 253.0  # 8-bit levels counted as clipped
MIN_SIDE = 64


def build(files: Mapping[str, Path] | None = None, mode: str = "pyiqa") -> torch.nn.Module:
    """No parameter files; `mode` is accepted for the native signature (both modes are the same)."""
    return EditDamage()


def combine(components: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The score: the sum of each component's term (see UNITS)."""
    total = None
    for name in COMPONENTS:
        offset, unit = UNITS[name]
        term = (components[name] - offset).clamp(min=0) / unit
        total = term if total is None else total + term
    return total


def terms(components: Mapping[str, float]) -> dict[str, float]:
    """Each component's share of the score (the term it adds), for one image."""
    return {n: max(0.0, float(components[n]) - UNITS[n][0]) / UNITS[n][1] for n in COMPONENTS}


def _gauss_kernel(sigma: float, device, dtype) -> torch.Tensor:
    radius = max(1, math.ceil(3 * sigma))
    t = torch.arange(-radius, radius + 1, device=device, dtype=dtype)
    k = torch.exp(-t * t / (2 * sigma * sigma))
    return k / k.sum()


def _separable(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """x (B,C,H,W) filtered by the 1-D kernel k along both axes, reflect-padded."""
    c, r = x.shape[1], k.numel() // 2
    x = F.pad(x, (r, r, 0, 0), mode="reflect") if r < x.shape[-1] else F.pad(x, (r, r, 0, 0), mode="replicate")
    x = F.conv2d(x, k.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    x = F.pad(x, (0, 0, r, r), mode="reflect") if r < x.shape[-2] else F.pad(x, (0, 0, r, r), mode="replicate")
    return F.conv2d(x, k.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)


def gauss(x: torch.Tensor, sigma: float) -> torch.Tensor:
    return _separable(x, _gauss_kernel(sigma, x.device, x.dtype))


def dog_white_gain(device=None, dtype=torch.float64) -> float:
    """Standard deviation of the band-pass output for unit white noise: sqrt(sum(h^2)) of its impulse response."""
    n = 2 * math.ceil(3 * max(DOG_SIGMAS)) + 1 + 2
    delta = torch.zeros(1, 1, n, n, dtype=dtype, device=device)
    delta[..., n // 2, n // 2] = 1
    h = gauss(delta, DOG_SIGMAS[0]) - gauss(delta, DOG_SIGMAS[1])
    return float(h.pow(2).sum().sqrt())


class EditDamage(torch.nn.Module):
    """forward(Bx3xHxW in [0, 1]) -> B edit-damage scores (0 = none found; higher = more), float64."""

    def __init__(self) -> None:
        super().__init__()
        self.white_gain = dog_white_gain()
        self.last_components: dict[str, torch.Tensor] = {}
        self.last_flat_share = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"edit_damage: expected Bx3xHxW, got shape {tuple(x.shape)}")
        if min(x.shape[-2:]) < MIN_SIDE:
            raise ValueError(f"edit_damage: images need at least {MIN_SIDE}x{MIN_SIDE} pixels, got "
                             f"{x.shape[-1]}x{x.shape[-2]}")
        rgb = x.to(torch.float32) * 255
        luma = (0.299 * rgb[:, 0:1] + 0.587 * rgb[:, 1:2] + 0.114 * rgb[:, 2:3])
        clipped = ((rgb <= CLIP_LOW) | (rgb >= CLIP_HIGH)).any(dim=1, keepdim=True)
        band = gauss(luma, DOG_SIGMAS[0]) - gauss(luma, DOG_SIGMAS[1])
        energy, usable = self._tiles(band, clipped)
        grain, flat_half = self._grain(energy, usable)
        comps = {
            "grain": grain,
            "lattice": self._lattice(luma, flat_half),
            "colour_cast": self._colour_cast(rgb, clipped),
            "softness": self._softness(luma),
        }
        self.last_components = {k: v.detach().to("cpu", torch.float64) for k, v in comps.items()}
        return combine({k: v.to(torch.float64) for k, v in comps.items()})

    @staticmethod
    def _tiles(band: torch.Tensor, clipped: torch.Tensor):
        """Per 16x16 tile: band-pass energy (B, nt) float64, and whether the tile is usable (not mostly clipped)."""
        h, w = band.shape[-2:]
        th, tw = h // TILE * TILE, w // TILE * TILE
        energy = F.avg_pool2d(band[..., :th, :tw].pow(2), TILE).flatten(1).to(torch.float64)
        clip_share = F.avg_pool2d(clipped[..., :th, :tw].to(band.dtype), TILE).flatten(1)
        return energy, clip_share < 0.5

    def _grain(self, energy: torch.Tensor, usable: torch.Tensor):
        """Noise floor (8-bit levels, white-noise equivalent) and the mask of the flatter half of the tiles."""
        inf = torch.tensor(float("inf"), dtype=energy.dtype, device=energy.device)
        ranked, _ = torch.where(usable, energy, inf).sort(dim=1)
        n_usable = usable.sum(dim=1)
        k = (n_usable.to(torch.float64) * FLATTEST).ceil().clamp(min=1).long()
        pos = torch.arange(ranked.shape[1], device=energy.device)
        take = (pos[None] < k[:, None]) & torch.isfinite(ranked)
        floor = torch.where(take, ranked, torch.zeros_like(ranked)).sum(1) / take.sum(1).clamp(min=1)
        grain = floor.sqrt() / self.white_gain
        # the flatter half of the usable tiles with any variation: where the lattice is looked for
        half = (n_usable.to(torch.float64) / 2).ceil().clamp(min=1).long()
        median = ranked.gather(1, (half - 1).clamp(min=0, max=ranked.shape[1] - 1)[:, None])
        flat_half = usable & (energy <= median) & (energy > 1e-6)
        return grain, flat_half

    @staticmethod
    def _lattice(luma: torch.Tensor, flat_half: torch.Tensor) -> torch.Tensor:
        """Largest normalised autocorrelation of the clipped high-pass residual at lags 3..32 px, on the flatter tiles."""
        b, _, h, w = luma.shape
        th, tw = h // TILE * TILE, w // TILE * TILE
        resid = (luma - gauss(luma, RESIDUAL_SIGMA))[:, 0, :th, :tw].to(torch.float64)
        weight = flat_half.view(b, 1, th // TILE, tw // TILE).to(torch.float64)
        weight = F.interpolate(weight, scale_factor=TILE, mode="nearest")[:, 0]
        wsum = weight.sum((1, 2)).clamp(min=1)
        mean = (weight * resid).sum((1, 2)) / wsum
        resid = (resid - mean[:, None, None]) * weight
        # clip at 3 robust standard deviations (median absolute deviation of the weighted residual)
        flat = resid.abs().flatten(1)
        mad = torch.stack([flat[i][weight[i].flatten() > 0].median() if bool((weight[i] > 0).any())
                           else flat.new_zeros(()) for i in range(b)])
        limit = (3 * 1.4826 * mad).clamp(min=1e-6)[:, None, None]
        resid = torch.maximum(torch.minimum(resid, limit), -limit)
        lag = min(MAX_LAG, th // 4, tw // 4)
        size = (th + lag, tw + lag)
        spec_r = torch.fft.rfft2(resid, s=size)
        spec_w = torch.fft.rfft2(weight, s=size)
        num = torch.fft.irfft2(spec_r.abs().pow(2), s=size)
        overlap = torch.fft.irfft2(spec_w.abs().pow(2), s=size)
        var = resid.pow(2).sum((1, 2)) / wsum
        idx = torch.cat([torch.arange(0, lag + 1), torch.arange(-lag, 0)]).to(luma.device)
        ys, xs = idx % size[0], idx % size[1]
        num = num[:, ys][:, :, xs]
        overlap = overlap[:, ys][:, :, xs]
        corr = num / overlap.clamp(min=1) / var.clamp(min=1e-12)[:, None, None]
        # a period shows as a peak over the lag half as long; a smooth fall-off (blur, correlated
        # grain) or a ridge along an edge does not
        n = idx.numel()
        half = torch.div(idx, 2, rounding_mode="trunc") % n
        corr = corr - corr[:, half][:, :, half].clamp(min=0)
        d = idx.abs()
        cheb = torch.maximum(d[:, None], d[None, :])
        valid = (cheb >= MIN_LAG) & (cheb <= lag)
        valid = valid[None] & (overlap >= 0.25 * wsum[:, None, None])
        corr = torch.where(valid, corr, torch.full_like(corr, -1.0))
        out = corr.flatten(1).max(1).values.clamp(min=0)
        return torch.where(var > 1e-12, out, torch.zeros_like(out))

    @staticmethod
    def _colour_cast(rgb: torch.Tensor, clipped: torch.Tensor) -> torch.Tensor:
        """Angle (degrees) between the grey-edge illuminant (mean gradient magnitude per channel) and grey."""
        smooth = gauss(rgb, 1.0)
        gy = smooth[..., 1:, :-1] - smooth[..., :-1, :-1]
        gx = smooth[..., :-1, 1:] - smooth[..., :-1, :-1]
        mag = (gx.pow(2) + gy.pow(2)).sqrt().to(torch.float64)
        keep = (~clipped[..., :-1, :-1]).to(torch.float64)
        e = (mag * keep).sum((2, 3))  # (B, 3)
        norm = e.norm(dim=1)
        cos = (e.sum(1) / (norm * math.sqrt(3)).clamp(min=1e-12)).clamp(-1, 1)
        angle = torch.rad2deg(torch.acos(cos))
        return torch.where(norm > 1e-9, angle, torch.zeros_like(angle))

    @staticmethod
    def _softness(luma: torch.Tensor) -> torch.Tensor:
        """Crete et al.'s blur effect (0 sharp .. 1 blurred) over the strongest 5 % of edges."""
        b = luma.shape[0]
        smooth = gauss(luma, 1.0)
        gy = F.pad(smooth[..., 1:, :] - smooth[..., :-1, :], (0, 0, 0, 1))
        gx = F.pad(smooth[..., :, 1:] - smooth[..., :, :-1], (0, 1, 0, 0))
        mag = (gx.pow(2) + gy.pow(2)).sqrt().flatten(1)
        sample = mag[:, ::7] if mag.shape[1] > 70_000 else mag
        k = max(1, int(round(sample.shape[1] * (1 - EDGE_SHARE))))
        threshold = sample.kthvalue(k, dim=1).values.clamp(min=1.0)  # edges of at least 1 level a pixel
        edges = (mag >= threshold[:, None]).view_as(luma)
        box = torch.ones(CRETE_TAPS, device=luma.device, dtype=luma.dtype) / CRETE_TAPS
        r = CRETE_TAPS // 2
        out = []
        for axis in (-1, -2):
            if axis == -1:
                blurred = F.conv2d(F.pad(luma, (r, r, 0, 0), mode="replicate"), box.view(1, 1, 1, -1))
            else:
                blurred = F.conv2d(F.pad(luma, (0, 0, r, r), mode="replicate"), box.view(1, 1, -1, 1))
            d_f = luma.diff(dim=axis).abs()
            d_b = blurred.diff(dim=axis).abs()
            v = (d_f - d_b).clamp(min=0)
            m = edges[..., 1:, :] if axis == -2 else edges[..., :, 1:]
            s_f = (d_f * m).flatten(1).sum(1).to(torch.float64)
            s_v = (v * m).flatten(1).sum(1).to(torch.float64)
            out.append(torch.where(s_f > 0, (s_f - s_v) / s_f.clamp(min=1e-12), torch.zeros_like(s_f)))
        return torch.maximum(out[0], out[1]).reshape(b)
