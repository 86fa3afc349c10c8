"""edit_damage: a cheap, reference-free detector of what recursive editing does to an image.

Interpretable components, each in a physical unit, each over a unit of damage, summed into one score
(higher = more damage). One per signature the paper names (arXiv:2604.03400; docs/edit-damage.md): grain, lattice and
colour_cast (Nano Banana Pro's static noise and tint), crease (Nano Banana 2 Fast's creases along
contours), speckles (FLUX.2), simplification (Qwen-Image-Edit's flattened texture), blocking (a chain
saved as JPEG step by step); softness for detail lost; texture, evenness and lattice_level weigh or
serve the others. What each measures, why, what was fitted and how far to trust it: docs/edit-damage.md
(the one home of the rationale) and the card built from the validation data.

`forward(x)` takes Bx3xHxW in [0, 1] (the native contract) and returns B float64 scores; after it,
`last_components` maps each component's name to a (B,) float64 tensor on the input's device and
`last_cast` the (B, 2) cast vector. A batch holds images of one size; every statistic is per image,
so batching does not change a score.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from pathlib import Path

import torch
import torch.nn.functional as F

from banana100.metrics.detector.filters import (bilinear_at, bilinear_grid, central_differences, fft_length,
                                                float64_total, gauss, luma_of, means_2x2, padded_difference, take,
                                                window_sum)

# the detector's names, one home: the bare score (banana100/metrics/table.py) and the same against a reference
# (the table's `companion` of NAME)
NAME = "edit_damage"
REL_NAME = "edit_damage_rel"

# each component, in its unit (what the card and `score`'s notes show)
COMPONENT_UNITS = {
    "grain": "8-bit levels; white noise of s levels on a flat area reads s",
    "lattice": "correlation (0-1), peak over the half lag; weighed down to 0 where the periodic part is no larger than 8-bit rounding",
    "colour_cast": "8-bit levels of Cb/Cr",
    "softness": "Crete's blur effect, 0 sharp to 1 blurred",
    "crease": "steps back of the mean profile across the strongest edges, per level of jump (0 = monotone on average)",
    "crease_edges": "variation across the strongest edges beyond their jump, edge by edge, per level of jump "
                    "(edit_damage_rel's crease; 0 = monotone edges)",
    "speckles": "isolated small outliers per megapixel",
    "simplification": "halvings of the fine band's amplitude against the coarse band's where there is structure",
    "blocking": "8-bit levels: mean step at the 8-pixel grid beyond the steps between the grid's lines (the grid at "
                "the corner, or where a crop after saving moved it)",
    "texture": "8-bit levels: the coarse band's (DoG sigma 2.5 and 6 px) floor, what content alone puts there",
    "evenness": "0-1: sqrt of the flattest 2 % of tiles' fine-band energy over the floor's (flattest 10 %); "
                "1 when grain covers every tile",
    "lattice_level": "8-bit levels: the periodic part's amplitude in the residual (what the lattice adds)",
}
COMPONENTS = tuple(COMPONENT_UNITS)
# measured only where edit_damage_rel asks for it (EditDamage(colour_edges=True), its StatsModel): no bare term reads
# it, and on a CPU it costs about a third more of an image's time (two Gaussians, two edge sets, two Crete sums;
# bench_edit_damage --told-the-source)
REL_ONLY_UNITS = {
    "colour_softness": "Crete's blur effect on the colour planes (BT.601 Cb, Cr) at their own strongest edges, the "
                       "larger of the two, 0 sharp to 1 blurred (edit_damage_rel's; JPEG codes colour at half "
                       "resolution, and each save blurs its edges again)",
}
# every component measured for either score: what edit_damage_rel's StatsModel reads and a scores file's column holds
ALL_COMPONENTS = (*COMPONENTS, *REL_ONLY_UNITS)
# The bare score's version is the metric table's `version` of edit_damage (bump it there whenever the form or
# the fitted constants change): scores files and the Space's caches name it.
# texture, evenness, lattice_level and crease_edges add no term of their own (the first two weigh grain's in the
# bare score; edit_damage_rel's lattice and crease terms read the other two: REL_COMPONENT)
TERMS = ("grain", "lattice", "colour_cast", "softness", "crease", "speckles", "simplification", "blocking")
SIGNATURE_TERMS = ("crease", "speckles", "simplification", "blocking")  # the terms of issue 42
# the component edit_damage_rel's term reads where it is not the bare term's own (docs/edit-damage.md: told the
# source, the lattice's amplitude adds up step after step, and the crease read edge by edge is not fooled)
REL_COMPONENT = {"lattice": "lattice_level", "crease": "crease_edges"}
UNITS = {  # component -> (offset, unit): term = max(0, component - offset) / unit (grain: see GRAIN_RATIO)
    "grain": (0.0, 2.0),  # the bare score's grain term is the ratio below; edit_damage_rel uses this unit
    "lattice": (0.05, 0.2),
    "colour_cast": (0.0, 2.0),
    "softness": (0.3, 0.1),  # offset fitted with the grain term (see GRAIN_RATIO); the unit is stated
    # stated units of the signatures' changes (edit_damage_rel): 10 % of an edge's jump more variation across
    # it; 100 isolated specks a megapixel; a quarter halving (16 %) of the fine band's amplitude; a mean
    # step of 1 level at the 8-pixel grid
    "crease": (0.0, 0.1),
    "speckles": (0.0, 100.0),
    "simplification": (0.0, 0.25),
    "blocking": (0.0, 1.0),
    "lattice_level": (0.0, 0.5),  # edit_damage_rel's lattice term: 0.5 level of periodic amplitude added
}
# The bare score's units where they differ from the stated ones above (edit_damage_rel keeps those): on
# one image alone, a cast is mostly the scene's light (warm photographs read 7 to 18 levels, foliage 30) and a
# lattice may be the content's own (ripples, facades), which a chain's source would tell apart and one
# image cannot; fitted with the grain term (bench/detector/fit_edit_damage.py, see GRAIN_RATIO). The four
# signatures' offsets and units were fitted after them, the rest held (docs/edit-damage.md).
BARE_UNITS = {**UNITS, "colour_cast": (0.0, 16.0), "lattice": (0.05, 0.4),
              "crease": (0.0, 0.2), "speckles": (50.0, 100.0), "simplification": (0.0, 0.25), "blocking": (0.25, 0.25)}
TILE = 16
FLATTEST = 0.10  # share of tiles whose band-pass energy is the noise floor
# evenness: the floor of the flattest EVEN_SHARE of the tiles over the floor (FLATTEST), in levels. Grain an
# edit adds covers every tile, so the flattest tiles cannot be much flatter than the floor (about 1); a floor
# that is content's (texture, a photograph's own detail) sits over tiles flatter still (towards 0)
EVEN_SHARE = 0.02
NO_FLOOR = 0.01  # grain (levels) below which there is no floor to weigh (a flat image's rounding): evenness 1
DOG_SIGMAS = (0.5, 2.5)
TEXTURE_SIGMAS = (2.5, 6.0)  # the coarser band: content's energy there predicts its fine-band floor
# bare grain term = (min(grain, cap) / unit_a + max(0, (noise + c) / (texture + c) - offset) / unit) x
# evenness, noise = grain x sqrt(1 - lattice) (since version 8, term_tensors); c is a stated floor (0.3 level)
# so that flat content gives a ratio of 1, not 0/0. GRAIN_ABS =
# (cap, unit_a), GRAIN_RATIO = (offset, unit), softness's offset (UNITS), BARE_UNITS' cast and lattice units
# and the weighing by evenness were fitted jointly, by grid search, by bench/detector/fit_edit_damage.py (results in
# bench/results/detector/fit_edit_damage.json): first the share of damaged copies scoring above their own clean source
# and every weaker copy of the same damage, then the ROC AUC clean vs damaged, on simulated-editor chains
# (steps 5 and 10) and clean skimage.data, drawn images and 12 photographs (mate-backgrounds) with blurred,
# grainy, gridded and tinted copies counted damaged and JPEG copies clean. Rerun that script to re-fit and
# print these.
GRAIN_RATIO_FLOOR = 0.3
GRAIN_RATIO = (2.0, 1.0)
# the capped absolute floor: blur lowers the ratio fast, the floor only as fast as grain; correlated
# grain fills the coarse band too, so the ratio misses it, the floor does not; past the cap, a floor
# is dense texture's (grass reads 24 levels), not grain
GRAIN_ABS = (8.0, 1.0)
RESIDUAL_SIGMA = 2.0  # passes periods of 8 px at 71 %, 4 px at 99 % (1 - exp(-2 pi^2 sigma^2 / p^2))
MIN_LAG, MAX_LAG = 3, 32
LATTICE_ROUNDING = 1 / math.sqrt(12)  # levels: the RMS of 8-bit rounding (uniform over one level)
EDGE_SHARE = 0.05  # strongest edges on which softness is measured
# an edge rises at least this much a pixel (levels; a contour's CREASE_MIN_JUMP across the crease's window): a gentle
# gradient (a sky, a soft render's shading) is none, and Crete's blur effect reads any ramp as blurred (a clean
# radial gradient read softness 0.8, a bare term of 5, at the 1 level a pixel before version 7)
EDGE_MIN_SLOPE = 2.0
CRETE_TAPS = 9
CLIP_LOW, CLIP_HIGH = 2.0, 253.0  # 8-bit levels counted as clipped
# BT.601 chroma: Cb = CB_GAIN (blue - luma), Cr = CR_GAIN (red - luma), in levels
CB_GAIN, CR_GAIN = 0.564, 0.713
NEUTRAL_CHROMA = 12.0  # Cb/Cr radius (levels) of the pixels taken as meant to be grey
MIN_NEUTRAL_SHARE = 0.01  # fewer near-neutral pixels than this: no cast measured
# a cast read from few greys is uncertain (a colourful image's handful of near-greys moves with any edit): its
# weight rises from 0 at MIN_NEUTRAL_SHARE to 1 at FULL_NEUTRAL_SHARE, so that it cannot jump from 0 to its full
# size when a few pixels cross the threshold
FULL_NEUTRAL_SHARE = 0.05
MIN_SIDE = 64
# crease: the mean profile across the contours, read along each edge's gradient from its centre (where the
# gradient peaks, to a fraction of a pixel) at 2 CREASE_REACH + 1 points a pixel apart, weighed by the edge's jump;
# the steps where that mean goes back (beyond CREASE_Z of its standard errors) are the crease, per level of jump.
# A crease or a halo sits at the same distance from every contour, so it survives the mean; a photograph's own
# texture beside its edges goes either way and averages out, and so does grain.
CREASE_REACH = 4
# profiles of centres a few pixels apart along a contour are not independent (the sigma-2 smoothing that finds
# the edges spans about 5 px): their standard errors count them CREASE_DEPENDENT times fewer; and two standard
# errors, so that a few contours alike (specks beside each other on a smooth render) are no mean
CREASE_DEPENDENT = 5
CREASE_Z = 2.0
# the mean profile's weight rises from 0 at CREASE_FEW independent profiles (contour pixels over CREASE_DEPENDENT)
# to 1 at CREASE_ENOUGH (since version 6): below about ten, a test at CREASE_Z standard errors has heavy tails
# (Student's t), and profiles all alike (a few on noisy bars) have no spread to test
CREASE_FEW, CREASE_ENOUGH = 10.0, 40.0
# crease_edges (edit_damage_rel's crease, version 4's crease): the variation across each edge over a window of
# 2 CREASE_REACH + 1 px along the axis its gradient follows, each step less a noise allowance (CREASE_NOISE x grain,
# at least CREASE_FLOOR), beyond the edge's jump
CREASE_ALONG = 5  # px averaged along the contour (the other axis): a crease follows it, grain does not
CREASE_NOISE = 0.6  # allowance a step, times grain (the average over CREASE_ALONG px leaves about 0.3 grain)
CREASE_FLOOR = 0.5  # the least allowance a step (levels): 8-bit rounding
# a contour: an edge whose jump across the window is at least this (levels, 2 a pixel): a speck, a ridge or a
# smooth render's gentle gradient is none, and a ratio over a jump near 0 is no measure; the mean profile's also
# asks it across twice the window (a contour separates two regions: specks beside each other come back down)
CREASE_MIN_JUMP = 16.0
# speckles: a pixel whose residual (luma less its sigma-2 blur) is at least SPECKLE_LEVELS and SPECKLE_K times
# its tile's mean absolute residual (the local background: texture raises it, so texture is not counted), the
# peak of its 5x5 window, with at most SPECKLE_PIXELS such pixels there (small and isolated, not an edge)
SPECKLE_LEVELS = 24.0
SPECKLE_K = 10.0
SPECKLE_PIXELS = 6
# and nothing half as strong 2 px from it (its 5x5 window's outer ring; since version 7): a speck stands alone, where
# a stroke, a line or a dot beside a letter's stem has its like there (bench/detector/hard_images.py: a typeset page
# read 1,053 specks a megapixel, now 137; clean astronaut 69, now 4; the speckles development chains' AUC rose)
SPECKLE_RING = 0.5
# simplification: tiles whose coarse band has at least SIMPLIFY_STRUCTURE levels (rms) and at least the median
# coarse energy hold structure; below it a smooth render's near-zero bands make a ratio of rounding
SIMPLIFY_STRUCTURE = 1.0
# and the median is read over at least SIMPLIFY_MIN_TILES such tiles, else it is not measured (0; since version 9):
# a soft render's 576 tiles (384 px) hold none to a few, JPEG's block edges lift a few more over the line, and a
# median of so few is rounding: a clean soft-blob render read 2 halvings of texture lost (bench.detector.hard_images)
SIMPLIFY_MIN_TILES = 8
BLOCK = 8  # JPEG's block
BLOCK_CLIP = 16.0  # neighbour differences clipped here (levels), so that content's edges do not swamp the grid


def moved_grid(excess: torch.Tensor) -> torch.Tensor:
    """A grid a crop moved (since version 10): from each phase's excess over the other seven (B, BLOCK), the largest
    one's lead over the next one, where the next has less than half the largest's excess (else 0). A JPEG's grid
    stands out at one phase (the others fall below their mean, the mid-block's a little above it); the two edges of a
    drawn line stand out at two alike, content of period 2 or 4 at two or four; and the largest of eight noisy
    phases is not a grid by its size alone (its lead over the second is small)."""
    top = excess.topk(2, dim=1).values
    second = top[:, 1].clamp(min=0)
    return torch.where(second < 0.5 * top[:, 0], top[:, 0] - second, torch.zeros_like(second))


def build(files: Mapping[str, Path] | None = None, mode: str = "pyiqa") -> torch.nn.Module:
    """No parameter files; `mode` is accepted for the native signature (both modes are the same)."""
    return EditDamage()


def grain_ratio(grain, texture):
    """The fine-band floor over the coarse-band floor (tensors or floats): 1 on flat content, higher
    the more of the fine energy content does not account for (noise adds fine energy, texture both)."""
    return (grain + GRAIN_RATIO_FLOOR) / (texture + GRAIN_RATIO_FLOOR)


def term_tensors(components: Mapping[str, torch.Tensor], floor=GRAIN_ABS, ratio=GRAIN_RATIO,
           units: Mapping[str, tuple[float, float]] = BARE_UNITS, even: bool = True) -> dict[str, torch.Tensor]:
    """Each term, from float64 tensors of the components. Grain's is (min(grain, cap) / unit_a +
    max(0, grain_ratio(noise) - offset) / unit) x evenness, noise the floor's share that does not repeat
    (floor = (cap, unit_a), ratio = (offset, unit); `even` False leaves evenness out, as before it was
    measured); each other's max(0, component - offset) / unit (`units`)."""
    (cap, unit_a), (offset, unit) = floor, ratio
    g = components["grain"]
    # the ratio reads the floor's share that does not repeat (since version 8): the lattice's correlation is the share
    # of the flatter tiles' residual energy that repeats, and a fine pattern's floor over its near-0 coarse band had
    # no bound (clean lines every 4 px read a grain term of 284). The capped part reads the whole floor: a grid an
    # edit adds is damage, and its amplitude counts there, as the lattice's correlation alone cannot count it
    noise = g * (1 - components["lattice"].clamp(0, 1)).sqrt()
    grain = g.clamp(max=cap) / unit_a + (grain_ratio(noise, components["texture"]) - offset).clamp(min=0) / unit
    out = {"grain": grain * components["evenness"] if even else grain}
    for name in TERMS[1:]:
        off, u = units[name]
        out[name] = (components[name] - off).clamp(min=0) / u
    return out


def combine(components: Mapping[str, torch.Tensor], floor=GRAIN_ABS, ratio=GRAIN_RATIO,
            units: Mapping[str, tuple[float, float]] = BARE_UNITS, even: bool = True) -> torch.Tensor:
    """The score: the sum of the terms. The defaults are the shipped constants; bench/detector/fit_edit_damage.py
    passes its grid's (a cap or unit_a of inf: no cap, no floor term; even=False: grain not weighed by
    evenness)."""
    return sum(term_tensors(components, floor, ratio, units, even).values())


def terms(components: Mapping[str, float]) -> dict[str, float]:
    """Each component's share of the score (the term it adds), for one image."""
    one = {k: torch.tensor(float(components[k]), dtype=torch.float64) for k in COMPONENTS}
    return {n: float(v) for n, v in term_tensors(one).items()}


def tile_overlap(tiles: torch.Tensor, lags: torch.Tensor) -> torch.Tensor:
    """(B, L, L): for each pair of pixel lags (dy, dx) in `lags`, the count of pixel pairs (p, p + d) with
    both in a tile of weight 1 of `tiles` (B, ny, nx), exactly: the tiles' own autocorrelation A at tile
    lags (a, b), spread to pixels by how much a tile shifted by d overlaps each neighbour (a pixel lag
    d = TILE q + s pairs TILE - s rows of a tile with the tile q on and s with the tile q + 1 on)."""
    q = torch.div(lags, TILE, rounding_mode="floor")
    s = (lags - q * TILE).to(tiles.dtype)
    lo, hi = int(q.min()), int(q.max()) + 1
    # the tiles' autocorrelation at tile lags lo..hi, one grouped convolution of each image's tiles with themselves
    # (the tiles are 0 or 1: whole sums, exact in any order), not 36 shifted products and sums
    p = max(-lo, hi)
    a_ = F.conv2d(F.pad(tiles, (p, p, p, p))[None], tiles[:, None], groups=tiles.shape[0])[0]
    a_ = a_[:, p + lo:p + hi + 1, p + lo:p + hi + 1]  # (B, n, n): a_[u, v] = sum of t[i, j] t[i + u, j + v]
    shifts = range(lo, hi + 1)
    spread = tiles.new_zeros(lags.numel(), len(shifts))
    rows = torch.arange(lags.numel(), device=lags.device)
    spread[rows, q - lo] = TILE - s
    spread[rows, q + 1 - lo] = s
    return torch.einsum("ia,zab,jb->zij", spread, a_, spread)


def dog_white_gain(device=None, dtype=torch.float64) -> float:
    """Standard deviation of the band-pass output for unit white noise: sqrt(sum(h^2)) of its impulse response."""
    n = 2 * math.ceil(3 * max(DOG_SIGMAS)) + 1 + 2
    delta = torch.zeros(1, 1, n, n, dtype=dtype, device=device)
    delta[..., n // 2, n // 2] = 1
    h = gauss(delta, DOG_SIGMAS[0]) - gauss(delta, DOG_SIGMAS[1])
    return float(h.pow(2).sum().sqrt())


class EditDamage(torch.nn.Module):
    """forward(Bx3xHxW in [0, 1]) -> B edit-damage scores (0 = none found; higher = more), float64."""

    def __init__(self, colour_edges: bool = False) -> None:
        super().__init__()
        # also measure REL_ONLY_UNITS' colour_softness (edit_damage_rel's StatsModel sets it; the bare score reads none)
        self.colour_edges = colour_edges
        self.white_gain = dog_white_gain()
        self.last_components: dict[str, torch.Tensor] = {}
        # (B, 2) float64: the cast as a (Cb, Cr) vector; relative scores compare its direction too
        self.last_cast: torch.Tensor | None = None
        self.last_flat_share = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"edit_damage: expected Bx3xHxW, got shape {tuple(x.shape)}")
        if min(x.shape[-2:]) < MIN_SIDE:
            raise ValueError(f"edit_damage: images need at least {MIN_SIDE}x{MIN_SIDE} pixels, got "
                             f"{x.shape[-1]}x{x.shape[-2]}")
        if x.device.type == "cpu" and x.shape[0] > 1:
            # on CPU one image at a time: a batch's intermediates outgrow the caches (`git show
            # b381d54:BENCHMARKS.md`, the edit_damage cost); the same numbers to float32 rounding
            scores, comps, casts = [], [], []
            for i in range(x.shape[0]):
                scores.append(self._measure(x[i:i + 1]))
                comps.append(self.last_components)
                casts.append(self.last_cast)
            self.last_components = {k: torch.cat([c[k] for c in comps]) for k in comps[0]}
            self.last_cast = torch.cat(casts)
            return torch.cat(scores)
        return self._measure(x)

    def _measure(self, x: torch.Tensor, at_points: bool | None = None) -> torch.Tensor:
        """The scores of a batch of one size; `at_points` (default: on CPU) reads the edge and speckle
        statistics at their pixels rather than over whole-image masks (the same numbers to float32 rounding)."""
        rgb = x.to(torch.float32) * 255
        luma = luma_of(rgb)
        clipped = (rgb.amin(dim=1, keepdim=True) <= CLIP_LOW) | (rgb.amax(dim=1, keepdim=True) >= CLIP_HIGH)
        shared = gauss(luma, DOG_SIGMAS[1])  # the fine band's low edge is the coarse band's high one
        fine = gauss(luma, DOG_SIGMAS[0])
        energy, usable = self._tiles(fine - shared), self._unclipped(clipped)
        grain, evenness, flat_half = self._grain(energy, usable)
        high = shared if TEXTURE_SIGMAS[0] == DOG_SIGMAS[1] else gauss(luma, TEXTURE_SIGMAS[0])
        coarse = self._tiles(high - gauss(luma, TEXTURE_SIGMAS[1]))
        texture = self._floor(*self._ranked(coarse, usable)).sqrt()
        smooth = gauss(luma, RESIDUAL_SIGMA)  # the residual's low-pass, and the edges' finder
        residual = luma - smooth
        # the cast is a mean over the near-neutral pixels: measured on 2x2 means, a quarter of the work
        half_rgb = means_2x2(rgb) if min(rgb.shape[-2:]) >= 2 * MIN_SIDE else rgb
        cast = self._colour_cast(half_rgb, luma_of(half_rgb))
        # left on the device: the engine fetches them with the scores, once per call (a copy to
        # the CPU here would be a wait per batch on a GPU)
        self.last_cast = cast.detach().to(torch.float64)
        if at_points is None:
            at_points = x.device.type == "cpu"
        colour = self._colour_softness(rgb, luma, at_points) if self.colour_edges else None
        del rgb, half_rgb, clipped, shared, high  # read no further: on a GPU each is a plane (or three) of the batch
        lattice, lattice_level = self._lattice(residual, flat_half)
        # on CPU the edge and speckle statistics are gathered at the few pixels they concern (an edge is 5 %
        # of the image); on a GPU the same sums over whole-image masks, which need no sync for a count
        edges = self._edges(smooth)
        points = edges.flatten().nonzero()[:, 0] if at_points else None
        gx, gy = central_differences(smooth)  # the edges' direction, for both creases
        softness = self._softness(luma, edges, points)
        comps = {
            "grain": grain,
            "lattice": lattice,
            "colour_cast": cast.pow(2).sum(1).sqrt(),
            "softness": softness,
            "crease": self._crease(fine, edges, gx, gy, points),
            "crease_edges": self._crease_edges(fine, edges, gx, gy, grain, points),
            "speckles": self._speckles(residual, at_points=points is not None),
            "simplification": self._simplification(energy, coarse, usable, (luma.shape[-2] // TILE, luma.shape[-1] // TILE)),
            "blocking": self._blocking(luma),
            "texture": texture,
            "evenness": evenness,
            "lattice_level": lattice_level,
        }
        if colour is not None:
            comps["colour_softness"] = colour
        self.last_components = {k: v.detach().to(torch.float64) for k, v in comps.items()}
        return combine({k: v.to(torch.float64) for k, v in comps.items()})

    @staticmethod
    def _colour_softness(rgb: torch.Tensor, luma: torch.Tensor, at_points: bool) -> torch.Tensor:
        """REL_ONLY_UNITS' colour_softness: `_softness` on each colour plane (BT.601 Cb, Cr, levels) at that plane's
        own strongest edges (`_edges` of it smoothed as the luma's are), the larger of the two; 0 where a plane has
        no edge of EDGE_MIN_SLOPE (a grey image). A colour edge need not be a luma edge, and read at the luma's
        edges it lost most of what JPEG does to colour (docs/edit-damage.md)."""
        out = []
        for channel, gain in ((2, CB_GAIN), (0, CR_GAIN)):
            plane = (rgb[:, channel:channel + 1] - luma) * gain
            edges = EditDamage._edges(gauss(plane, RESIDUAL_SIGMA))
            points = edges.flatten().nonzero()[:, 0] if at_points else None
            out.append(EditDamage._softness(plane, edges, points))
        return torch.maximum(out[0], out[1])

    @staticmethod
    def _crease(fine: torch.Tensor, edges: torch.Tensor, gx: torch.Tensor, gy: torch.Tensor,
                points: torch.Tensor | None = None) -> torch.Tensor:
        """Creases and halos: the jump-weighted mean profile of the lightly smoothed luma across the contours
        (edges that are gradient peaks along their gradient, jumping CREASE_MIN_JUMP across the window and across
        twice it), read along each one's gradient from its centre; twice the sum of the steps where that mean
        falls by more than CREASE_Z standard errors, per level of jump (0: monotone on average). `points` (the
        edges' flat indices, on CPU): read at the edge pixels instead of over the whole image (the same sums).
        `gx`, `gy`: the smoothed luma's central differences (`central_differences`)."""
        b, r = fine.shape[0], CREASE_REACH
        mag = (gx.pow(2) + gy.pow(2)).sqrt()  # twice the gradient: only its direction and its peaks are read
        h, w = fine.shape[-2:]
        if points is None:  # every pixel, masked later: no sync for a count on a GPU
            yy, xx = torch.meshgrid(torch.arange(h, device=fine.device, dtype=fine.dtype),
                                    torch.arange(w, device=fine.device, dtype=fine.dtype), indexing="ij")
            y, x = yy.expand(b, 1, h, w), xx.expand(b, 1, h, w)
            image = None
            at = lambda plane: plane  # noqa: E731 - a plane's values at the centres: itself
            sample = lambda plane, sy, sx: bilinear_grid(plane, sy, sx)  # noqa: E731
            total = lambda t: t.flatten(1).sum(1, dtype=torch.float64)  # noqa: E731 - per image
        else:
            image, y, x = points // (h * w), (points // w % h).to(fine.dtype), (points % w).to(fine.dtype)
            at = lambda plane: take(plane.flatten(), points)  # noqa: E731
            sample = lambda plane, sy, sx: bilinear_at(plane, image, sy, sx)  # noqa: E731
            total = lambda t: torch.zeros(b, dtype=torch.float64, device=t.device).index_add_(  # noqa: E731
                0, image, t.to(torch.float64))
        m0 = at(mag)
        ny, nx = at(gy) / m0.clamp(min=1e-12), at(gx) / m0.clamp(min=1e-12)
        along = lambda plane, t: sample(plane, y + t * ny, x + t * nx)  # noqa: E731 - t px along the gradient
        ahead, behind = along(mag, 1.0), along(mag, -1.0)
        peak = (m0 >= ahead) & (m0 >= behind) & (m0 > 0)
        curve = ahead - 2 * m0 + behind  # the parabola through the three: its top, within half a pixel
        centre = torch.where(curve < 0, 0.5 * (behind - ahead) / curve.clamp(max=-1e-12),
                             torch.zeros_like(curve)).clamp(-0.5, 0.5)
        del mag, m0, ahead, behind, curve  # on the whole-image path each is a plane of the batch
        if image is None:
            peak = peak & edges
        else:  # on CPU the profiles are read at the peaks only (a fifth of the edge pixels)
            keep = peak.nonzero()[:, 0]
            image, y, x, ny, nx, centre, peak = (t[keep] for t in (image, y, x, ny, nx, centre, peak))
        if image is not None:  # on CPU the window's 9 points of the few peaks in one read: the calls cost, not memory
            profile = along(fine, centre + torch.arange(-r, r + 1, device=fine.device, dtype=fine.dtype)[:, None])
            first, last = profile[0], profile[-1]
        else:  # on a GPU the window's ends first (which edges are contours), then its steps one at a time: a few
            # planes of the batch held at once, not the window's 9
            first, last = along(fine, centre - r), along(fine, centre + r)
        jump = last - first
        wide = along(fine, centre + 2 * r) - along(fine, centre - 2 * r)
        # a profile that reaches past the frame reads its padding, not the image (since version 6): stripes that
        # meet the frame mirror there into contours no other contour cancels (bench/detector/hard_images.py)
        inside = lambda t: ((y + t * ny).clamp(0, h - 1) == y + t * ny) & ((x + t * nx).clamp(0, w - 1) == x + t * nx)  # noqa: E731
        contour = (peak & inside(centre - r) & inside(centre + r) & (jump >= CREASE_MIN_JUMP)
                   & (wide >= CREASE_MIN_JUMP))
        jump = torch.where(contour, jump, torch.zeros_like(jump))
        s_w, s_w2 = total(jump), total(jump * jump)
        if image is not None:
            d = torch.where(contour, profile.diff(dim=0), torch.zeros_like(jump))  # (window's steps, peaks)
            per_step = lambda t: torch.zeros(b, 2 * r, dtype=torch.float64, device=t.device).index_add_(  # noqa: E731
                0, image, t.T.to(torch.float64))
            s_d, s_jd, s_d2 = per_step(d), per_step(d * jump), per_step(d * d)
        else:
            sums = {"d": [], "jd": [], "d2": []}
            before = first
            for k in range(-r + 1, r + 1):
                after = last if k == r else along(fine, centre + k)
                d = torch.where(contour, after - before, torch.zeros_like(jump))
                sums["d"].append(total(d))
                sums["jd"].append(total(d * jump))
                sums["d2"].append(total(d * d))
                before = after
            s_d, s_jd, s_d2 = (torch.stack(sums[n], 1) for n in ("d", "jd", "d2"))
        wsum = s_w.clamp(min=1e-12)[:, None]
        mean = s_d / wsum  # the mean profile's steps, per level of jump
        spread = (s_d2 - 2 * mean * s_jd + mean.pow(2) * s_w2[:, None]).clamp(min=0)
        error = spread.sqrt() / wsum * math.sqrt(CREASE_DEPENDENT)
        back = 2 * (-mean - CREASE_Z * error).clamp(min=0).sum(1)
        # a mean of few profiles is no mean (a few alike pass any test of their spread): weighed by how many there are
        profiles = total(contour.to(jump.dtype)) / CREASE_DEPENDENT
        weight = ((profiles - CREASE_FEW) / (CREASE_ENOUGH - CREASE_FEW)).clamp(0, 1)
        return torch.where(s_w > 0, back * weight, torch.zeros_like(back))

    @staticmethod
    def _crease_edges(fine: torch.Tensor, edges: torch.Tensor, gx: torch.Tensor, gy: torch.Tensor,
                      grain: torch.Tensor, points: torch.Tensor | None = None) -> torch.Tensor:
        """Creases and halos edge by edge (edit_damage_rel's crease: told the source, each edge's own variation
        is compared with the source's, so a photograph's texture beside its edges cancels and a line beside a few
        contours still counts): on the strongest edges, the variation of the lightly smoothed luma across a
        window of 2 CREASE_REACH + 1 px along the axis the edge's gradient follows (averaged over CREASE_ALONG
        px along the contour, which a crease follows and grain does not; each step less a noise allowance),
        beyond the edge's jump there, as a share of that jump (0: every edge is monotone). `points` (the
        edges' flat indices, on CPU): the window read at each edge pixel instead of computed everywhere and
        masked (the same sums)."""
        b, r = fine.shape[0], CREASE_REACH
        allowance = (CREASE_NOISE * grain).clamp(min=CREASE_FLOOR).to(fine.dtype).view(b, 1, 1, 1)
        # whether the gradient follows x (central differences, 0 past the border), everywhere or at the points
        if points is None:
            follows_x = gx.abs() >= gy.abs()
        else:
            follows_x = take(gx.flatten(), points).abs() >= take(gy.flatten(), points).abs()
        excess = torch.zeros(b, dtype=torch.float64, device=fine.device)
        jumps = torch.zeros_like(excess)
        half = CREASE_ALONG // 2
        for axis in (-1, -2):
            n, other = fine.shape[axis], -2 if axis == -1 else -1
            if n <= 2 * r + 1 or fine.shape[other] <= CREASE_ALONG:
                continue
            pad = (0, 0, half, half) if other == -2 else (half, half, 0, 0)
            f = window_sum(F.pad(fine, pad, mode="replicate"), CREASE_ALONG, other) / CREASE_ALONG
            m = n - 2 * r  # window centres r .. n - r - 1
            if points is not None:
                f = f.contiguous()
                stride = f.stride(axis)
                pos = (points // stride) % n  # the coordinate along the axis
                centres = points[(follows_x == (axis == -1)) & (pos >= r) & (pos < n - r)]
                # the 2r + 1 values across each centre, k = -r .. r along the axis
                values = take(f.flatten(), centres[:, None] + stride * torch.arange(-r, r + 1, device=f.device))
                image = centres // f[0].numel()
                steps = (values.diff(dim=1).abs() - allowance.flatten()[image, None]).clamp(min=0)
                jump = (values[:, -1] - values[:, 0]).abs()
                contour = (jump >= CREASE_MIN_JUMP).to(jump.dtype)  # a contour, not a speck or a gentle gradient
                excess.index_add_(0, image, ((steps.sum(1) - jump).clamp(min=0) * contour).to(torch.float64))
                jumps.index_add_(0, image, (jump * contour).to(torch.float64))
                continue
            steps = (f.diff(dim=axis).abs() - allowance).clamp(min=0)
            variation = window_sum(steps, 2 * r, axis)
            jump = (f.narrow(axis, 2 * r, m) - f.narrow(axis, 0, m)).abs()
            mask = (edges & (follows_x if axis == -1 else ~follows_x)).narrow(axis, r, m) & (jump >= CREASE_MIN_JUMP)
            excess += ((variation - jump).clamp(min=0) * mask).flatten(1).sum(1, dtype=torch.float64)
            jumps += (jump * mask).flatten(1).sum(1, dtype=torch.float64)
        return torch.where(jumps > 0, excess / jumps.clamp(min=1e-12), torch.zeros_like(jumps))

    @staticmethod
    def _speckles(residual: torch.Tensor, at_points: bool = False) -> torch.Tensor:
        """Isolated small outliers against the local background, per megapixel. `at_points`: the 5x5 window
        read around each strong pixel (few) instead of computed everywhere (the same count)."""
        h, w = residual.shape[-2:]
        th, tw = h // TILE * TILE, w // TILE * TILE
        mag = residual[..., :th, :tw].abs()
        tile_mean = F.avg_pool2d(mag, TILE)
        if at_points:
            return EditDamage._speckles_at_points(mag[:, 0], tile_mean[:, 0]) * (1e6 / (th * tw))
        background = tile_mean.repeat_interleave(TILE, -2).repeat_interleave(TILE, -1)
        strong = (mag >= SPECKLE_LEVELS) & (mag >= SPECKLE_K * background)
        # the peak of its 5x5 window (separable maxima), with few strong pixels there (separable sums)
        padded = F.pad(mag, (2, 2, 2, 2))
        peak = padded
        for dim in (-1, -2):
            peak = functools.reduce(torch.maximum, [peak.narrow(dim, j, peak.shape[dim] - 4) for j in range(5)])
        crowd = F.pad(strong.to(mag.dtype), (2, 2, 2, 2))
        crowd = window_sum(window_sum(crowd, 5, -1), 5, -2)
        # the window's outer ring (2 px from the pixel): its top and bottom rows, then the sides between them
        ring = functools.reduce(torch.maximum, [padded[..., dy:dy + th, dx:dx + tw] for dy in (0, 4) for dx in range(5)]
                                + [padded[..., dy:dy + th, dx:dx + tw] for dy in (1, 2, 3) for dx in (0, 4)])
        alone = ring < SPECKLE_RING * mag
        count = (strong & (mag >= peak) & (crowd <= SPECKLE_PIXELS + 0.5) & alone).flatten(1).sum(1).to(torch.float64)
        return count * (1e6 / (th * tw))

    @staticmethod
    def _speckles_at_points(mag: torch.Tensor, tile_mean: torch.Tensor) -> torch.Tensor:
        """The speckle count per image of mag (B, H, W) with its tiles' means (B, H/TILE, W/TILE), looked
        up around the strong pixels only (pixels outside the image count as 0, as the padding does)."""
        b, h, w = mag.shape

        def strong_at(i, y, x):
            m = mag[i, y, x]
            return (m >= SPECKLE_LEVELS) & (m >= SPECKLE_K * tile_mean[i, y // TILE, x // TILE])

        i, y, x = (mag >= SPECKLE_LEVELS).nonzero(as_tuple=True)
        keep = strong_at(i, y, x)
        i, y, x = i[keep], y[keep], x[keep]
        d = torch.arange(-2, 3, device=mag.device)
        wy, wx = (y[:, None] + d)[:, :, None], (x[:, None] + d)[:, None, :]  # (n, 5, 1), (n, 1, 5)
        inside = (wy >= 0) & (wy < h) & (wx >= 0) & (wx < w)
        wy, wx, wi = wy.clamp(0, h - 1), wx.clamp(0, w - 1), i[:, None, None]
        around = torch.where(inside, mag[wi, wy, wx], torch.zeros((), dtype=mag.dtype))
        crowd = (inside & strong_at(wi, wy, wx)).flatten(1).sum(1)
        ring = around.clone()
        ring[:, 1:4, 1:4] = 0  # the window's outer ring: what lies 2 px from the speck
        alone = ring.flatten(1).amax(1) < SPECKLE_RING * mag[i, y, x]
        isolated_peak = (mag[i, y, x] >= around.flatten(1).amax(1)) & (crowd <= SPECKLE_PIXELS) & alone
        return torch.zeros(b, dtype=torch.float64, device=mag.device).index_add_(
            0, i, isolated_peak.to(torch.float64))

    @staticmethod
    def _simplification(energy: torch.Tensor, coarse: torch.Tensor, usable: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        """-log2 of the median, over the usable tiles with at least the median coarse-band energy (where the
        image has structure at coarser scales), of the fine band's amplitude over the coarse band's: texture
        flattened by an edit lowers the fine band where the coarse structure stays (0, not measured, over fewer than
        SIMPLIFY_MIN_TILES tiles). The fine band is taken as
        the most of the tile's and its 8 neighbours' (`grid`: the tiles' rows and columns): an edge's coarse
        band reaches a tile further than its fine band does, so a flat graphic's tiles beside its edges are not
        texture lost."""
        fine = F.max_pool2d(energy.view(-1, 1, *grid), 3, stride=1, padding=1).flatten(1)
        inf = torch.tensor(float("inf"), dtype=coarse.dtype, device=coarse.device)
        ranked, n_usable = EditDamage._ranked(coarse, usable)
        half = (n_usable.to(torch.float64) / 2).ceil().clamp(min=1).long()
        median = ranked.gather(1, (half - 1).clamp(min=0, max=ranked.shape[1] - 1)[:, None])
        structured = usable & (coarse >= median) & (coarse >= SIMPLIFY_STRUCTURE ** 2)
        ratio = torch.where(structured, (fine + 1e-6) / coarse.clamp(min=1e-6), inf).sort(dim=1)[0]
        n = structured.sum(1)
        mid = ratio.gather(1, ((n - 1).clamp(min=0) // 2)[:, None])[:, 0]
        out = -0.5 * torch.log2(mid.clamp(min=1e-12))
        return torch.where(n >= SIMPLIFY_MIN_TILES, out, torch.zeros_like(out))

    @staticmethod
    def _blocking(luma: torch.Tensor) -> torch.Tensor:
        """The mean neighbour difference (clipped at BLOCK_CLIP) across the 8-pixel grid's lines less that
        between them, both axes averaged (levels). A JPEG's blocks start at the image's top left corner, and
        a crop after saving moves them: per axis, the grid's phase at the corner, or the phase that stands out
        from the other seven by more than the next one does (`moved_grid`)."""
        out = []
        for axis in (-1, -2):
            d = luma.diff(dim=axis).abs_().clamp_(max=BLOCK_CLIP)
            profile = d.mean(dim=-2 if axis == -1 else -1, dtype=torch.float64).flatten(1)  # (B, n - 1)
            n = profile.shape[1] // BLOCK * BLOCK
            if n < 2 * BLOCK:
                out.append(torch.zeros(profile.shape[0], dtype=torch.float64, device=luma.device))
                continue
            by_phase = profile[:, :n].reshape(profile.shape[0], -1, BLOCK).mean(1)  # phase BLOCK - 1: the corner's grid
            # each phase's mean step less the other seven's (phase BLOCK - 1: the form before version 10, its numbers)
            excess = torch.stack([by_phase[:, p] - torch.cat([by_phase[:, :p], by_phase[:, p + 1:]], 1).mean(1)
                                  for p in range(BLOCK)], 1)
            out.append(torch.maximum(excess[:, BLOCK - 1], moved_grid(excess)))
        return ((out[0] + out[1]) / 2).clamp(min=0)

    @staticmethod
    def _tiles(band: torch.Tensor) -> torch.Tensor:
        """Per 16x16 tile: band-pass energy (B, nt) float64. The band is squared in place: pass a plane read no
        further."""
        h, w = band.shape[-2:]
        part = band[..., :h // TILE * TILE, :w // TILE * TILE]
        return F.avg_pool2d(part.mul_(part), TILE).flatten(1).to(torch.float64)  # x * x: pow(2)'s numbers

    @staticmethod
    def _unclipped(clipped: torch.Tensor) -> torch.Tensor:
        """Per 16x16 tile (B, nt): whether it is usable, not mostly clipped."""
        h, w = clipped.shape[-2:]
        return F.avg_pool2d(clipped[..., :h // TILE * TILE, :w // TILE * TILE].float(), TILE).flatten(1) < 0.5

    @staticmethod
    def _ranked(energy: torch.Tensor, usable: torch.Tensor):
        """Tile energies sorted ascending (unusable tiles last, as inf), and the count of usable ones."""
        inf = torch.tensor(float("inf"), dtype=energy.dtype, device=energy.device)
        return torch.where(usable, energy, inf).sort(dim=1)[0], usable.sum(dim=1)

    @staticmethod
    def _floor(ranked: torch.Tensor, n_usable: torch.Tensor, share: float = FLATTEST) -> torch.Tensor:
        """Mean energy of the flattest `share` of the usable tiles (at least one; 0 when none is usable)."""
        k = (n_usable.to(torch.float64) * share).ceil().clamp(min=1).long()
        pos = torch.arange(ranked.shape[1], device=ranked.device)
        take = (pos[None] < k[:, None]) & torch.isfinite(ranked)
        return torch.where(take, ranked, torch.zeros_like(ranked)).sum(1) / take.sum(1).clamp(min=1)

    def _grain(self, energy: torch.Tensor, usable: torch.Tensor):
        """Noise floor (8-bit levels, white-noise equivalent), its evenness (0-1) and the mask of the flatter
        half of the tiles."""
        ranked, n_usable = self._ranked(energy, usable)
        floor = self._floor(ranked, n_usable)
        grain = floor.sqrt() / self.white_gain
        # 1 where there is no floor to weigh (NO_FLOOR), and, in effect, where too few tiles are usable for
        # the flattest 2 % and 10 % to differ (10 or fewer: both are the flattest tile)
        evenness = torch.where(grain > NO_FLOOR,
                               (self._floor(ranked, n_usable, EVEN_SHARE) / floor.clamp(min=1e-30)).sqrt(),
                               torch.ones_like(floor)).clamp(max=1)
        # the flatter half of the usable tiles with any variation: where the lattice is looked for
        half = (n_usable.to(torch.float64) / 2).ceil().clamp(min=1).long()
        median = ranked.gather(1, (half - 1).clamp(min=0, max=ranked.shape[1] - 1)[:, None])
        flat_half = usable & (energy <= median) & (energy > 1e-6)
        return grain, evenness, flat_half

    @staticmethod
    def _lattice(residual: torch.Tensor, flat_half: torch.Tensor):
        """Peak-over-half-lag of the normalised autocorrelation of the clipped high-pass residual
        at lags 3..32 px, on the flatter tiles, and the periodic amplitude it stands for (levels)."""
        b, _, h, w = residual.shape
        th, tw = h // TILE * TILE, w // TILE * TILE
        resid = residual[:, 0, :th, :tw]
        weight = flat_half.view(b, 1, th // TILE, tw // TILE).to(resid.dtype)
        weight = F.interpolate(weight, scale_factor=TILE, mode="nearest")[:, 0]
        # the weight's sum is its tiles' count (exact); on the CPU the other sums go through one float64 plane and one
        # float32 plane, reused (float64_total): a new plane's pages cost there (bench_edit_damage --baseline f3bade6)
        wsum = (flat_half.sum(1, dtype=torch.float64) * (TILE * TILE)).clamp(min=1)
        wide = resid.new_empty(resid.shape, dtype=torch.float64) if resid.device.type == "cpu" else None
        temp = torch.empty_like(resid)
        total = functools.partial(float64_total, buffer=wide)

        mean = total(torch.mul(weight, resid, out=temp)) / wsum
        resid = (resid - mean[:, None, None].to(resid.dtype)) * weight
        # clip at 3 standard deviations (of the flatter tiles: edges are already left out), so that
        # a few strong pixels cannot make the correlation
        rms = (total(torch.mul(resid, resid, out=temp)) / wsum).sqrt()
        limit = (3 * rms).clamp(min=1e-6)[:, None, None].to(resid.dtype)
        resid = torch.maximum(torch.minimum(resid, limit), -limit)
        lag = min(MAX_LAG, th // 4, tw // 4)
        # zero-padded past th + lag (no wrap-around at the lags read), to a length whose factors the FFT is fast on
        size = (fft_length(th + lag), fft_length(tw + lag))
        num = torch.fft.irfft2(torch.fft.rfft2(resid, s=size).abs().pow(2), s=size)
        var = (total(torch.mul(resid, resid, out=temp)) / wsum).to(num.dtype)
        del wide, temp
        idx = torch.cat([torch.arange(0, lag + 1), torch.arange(-lag, 0)]).to(residual.device)
        ys, xs = idx % size[0], idx % size[1]
        num = num[:, ys][:, :, xs]
        overlap = tile_overlap(flat_half.view(b, th // TILE, tw // TILE).to(torch.float64), idx).to(num.dtype)
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
        out = corr.flatten(1).max(1).values.clamp(min=0).to(torch.float64)
        var = var.to(torch.float64)
        out = torch.where(var > 1e-12, out, torch.zeros_like(out))
        # the periodic part's amplitude (levels): its covariance at the peak is its energy; unlike the
        # correlation it adds up step after step, and the source's own counts against it in quadrature
        level = (out * var).sqrt()
        # no larger than 8-bit rounding's, a period is the staircase of a gentle gradient rounded (banding), not a
        # lattice: the correlation counts from nothing at LATTICE_ROUNDING to fully at twice it (since version 7)
        weight = ((level - LATTICE_ROUNDING) / LATTICE_ROUNDING).clamp(0, 1)
        return out * weight, level

    @staticmethod
    def _colour_cast(rgb: torch.Tensor, luma: torch.Tensor) -> torch.Tensor:
        """(B, 2) chroma (8-bit levels, BT.601 Cb/Cr) of the mean of the near-neutral, unclipped pixels:
        a tint moves the greys off neutral; colourful content has few near-neutral pixels and
        they average out."""
        # chroma relative to luma, in levels at mid grey: a tint is a gain per channel, so a dark
        # grey moves less than a bright one in absolute levels but as much relative to its luma
        rel = 128 / luma.clamp(min=8)
        cb = CB_GAIN * (rgb[:, 2:3] - luma) * rel
        cr = CR_GAIN * (rgb[:, 0:1] - luma) * rel
        lo, hi = rgb.amin(dim=1, keepdim=True), rgb.amax(dim=1, keepdim=True)
        unclipped = (lo > CLIP_LOW) & (hi < CLIP_HIGH)
        zero = torch.zeros(luma.shape[0], dtype=torch.float64, device=luma.device)
        centre_cb, centre_cr = zero, zero
        # twice: first around neutral with a doubled radius, then around that first estimate, so
        # that a strong tint does not push the greys out of the set that measures it. The first estimate moves the
        # centre only from MIN_NEUTRAL_SHARE of the pixels (since version 14): a handful of greys is no estimate of a
        # tint, and a uniform dark purple (GNOME's vnc-d) whose one pixel in 16,384 fell inside the first radius was
        # re-centred onto its whole colour, which then read as a cast of 30 levels (0 the step before and after).
        # Moved by the share's weight instead, a JPEG's drifting greys (GNOME's truchet) lost the cast step by step
        for radius in (2 * NEUTRAL_CHROMA, NEUTRAL_CHROMA):
            dcb = cb - centre_cb.view(-1, 1, 1, 1).to(cb.dtype)
            dcr = cr - centre_cr.view(-1, 1, 1, 1).to(cr.dtype)
            neutral = ((dcb.pow(2) + dcr.pow(2)) < radius ** 2) & unclipped
            n = neutral.sum((1, 2, 3), dtype=torch.float64)
            estimate = n >= MIN_NEUTRAL_SHARE * luma[0].numel()
            centre_cb = torch.where(estimate, (cb * neutral).sum((1, 2, 3), dtype=torch.float64) / n.clamp(min=1), zero)
            centre_cr = torch.where(estimate, (cr * neutral).sum((1, 2, 3), dtype=torch.float64) / n.clamp(min=1), zero)
        share = n / luma[0].numel()
        weight = ((share - MIN_NEUTRAL_SHARE) / (FULL_NEUTRAL_SHARE - MIN_NEUTRAL_SHARE)).clamp(0, 1)
        return torch.stack([centre_cb, centre_cr], 1) * weight[:, None]

    @staticmethod
    def _edges(smooth: torch.Tensor) -> torch.Tensor:
        """The strongest EDGE_SHARE of the smoothed luma's gradients (at least EDGE_MIN_SLOPE a pixel): (B, 1, H, W)."""
        gy, gx = padded_difference(smooth, -2, 1, 0), padded_difference(smooth, -1, 1, 0)
        mag = (gx.pow(2) + gy.pow(2)).flatten(1)
        sample = mag[:, ::7] if mag.shape[1] > 70_000 else mag
        k = max(1, int(round(sample.shape[1] * (1 - EDGE_SHARE))))
        threshold = sample.kthvalue(k, dim=1).values.clamp(min=EDGE_MIN_SLOPE ** 2)
        return (mag >= threshold[:, None]).view_as(smooth)

    @staticmethod
    def _softness(luma: torch.Tensor, edges: torch.Tensor, points: torch.Tensor | None = None) -> torch.Tensor:
        """Crete et al.'s blur effect (0 sharp .. 1 blurred) over the edges. `points` (the edges' flat
        indices, on CPU): the differences read at each edge pixel instead of computed everywhere and masked
        (the same sums)."""
        b, r = luma.shape[0], CRETE_TAPS // 2
        out = []
        for axis in (-1, -2):
            n = luma.shape[axis]
            if points is not None:
                s_f, s_v = EditDamage._crete_sums_at(luma, points, axis)
            else:
                # the 9-tap box along the axis (replicate padding) differs between neighbours by the two taps
                # that leave and enter it: no blurred image is needed
                pad = (r, r, 0, 0) if axis == -1 else (0, 0, r, r)
                padded = F.pad(luma, pad, mode="replicate")
                d_b = (padded.narrow(axis, CRETE_TAPS, n - 1) - padded.narrow(axis, 0, n - 1)).abs() / CRETE_TAPS
                d_f = luma.diff(dim=axis).abs()
                v = (d_f - d_b).clamp(min=0)
                m = edges.narrow(axis, 1, n - 1)
                s_f = (d_f * m).flatten(1).sum(1, dtype=torch.float64)
                s_v = (v * m).flatten(1).sum(1, dtype=torch.float64)
            out.append(torch.where(s_f > 0, (s_f - s_v) / s_f.clamp(min=1e-12), torch.zeros_like(s_f)))
        return torch.maximum(out[0], out[1]).reshape(b)

    @staticmethod
    def _crete_sums_at(luma: torch.Tensor, points: torch.Tensor, axis: int):
        """Per image, the sums over the edge points p (past the first along `axis`) of |luma[p] - luma[p-1]|
        and of its excess over the 9-tap box's difference there, |luma[p+4] - luma[p-5]| / 9 (replicate
        padding: indices clamped)."""
        r, n = CRETE_TAPS // 2, luma.shape[axis]
        luma = luma.contiguous()
        flat, stride = luma.flatten(), luma.stride(axis)
        pos = (points // stride) % n
        where, pos = points[pos >= 1], pos[pos >= 1]
        d_f = (take(flat, where) - take(flat, where - stride)).abs()
        ahead = where + stride * ((pos + r).clamp(max=n - 1) - pos)
        behind = where + stride * ((pos - r - 1).clamp(min=0) - pos)
        d_b = (take(flat, ahead) - take(flat, behind)).abs() / CRETE_TAPS
        image = where // luma[0].numel()
        zero = torch.zeros(luma.shape[0], dtype=torch.float64, device=luma.device)
        return (zero.index_add(0, image, d_f.to(torch.float64)),
                zero.index_add(0, image, (d_f - d_b).clamp(min=0).to(torch.float64)))
