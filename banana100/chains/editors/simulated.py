"""An offline MODEL of recursive-copy degradation. It is not Nano Banana and its images are not
Nano Banana output.

The Banana100 paper (arXiv 2604.03400) asks Nano Banana Pro to copy an image a hundred times
and reports what accumulates: static noise (fine grain that grows with the steps) and colour
drift (a green tint). This editor imitates those effects, plus a little softness and a JPEG round
trip that are modelling choices of ours (see below), with a few cheap image operations so that the whole toolkit (runner,
manifest, dataset builder, metrics, report, Space) can be exercised offline, deterministically
and in milliseconds per step. Each call applies, in order:

1. the setting's geometric instruction (`request.simulate["transform"]`): `none`, `hflip`
   (mirror left-right), `rotate90` (90 degrees counter-clockwise), `desaturate` (greyscale)
   or `recolor` (an approximation: a fixed warm tint over the luma, since lost colours cannot
   be known), since the model cannot read the prompt text; object additions are not modelled
   and `image_size` is ignored;
2. resampling softness: a down-and-up resample (Lanczos by default) at a scale drawn per step
   from `resample_scale`; this removes the finest detail, and the Lanczos ringing acts as a
   mild sharpening that amplifies the mid-frequency grain left by earlier steps, so the noise
   builds up step after step instead of being smoothed away;
3. a touch of 3x3 box blur (`soften`) that keeps that amplification near 1 so the grain grows
   steadily rather than running away, and, off by default, an extra unsharp mask
   (`sharpen_percent`, `sharpen_radius`) for stronger sharpening;
4. colour drift: per-channel gains and offsets pulled toward green by `drift_strength` each
   step, plus seeded random jitter of size `drift_jitter`;
5. static noise: Gaussian luminance grain (`noise_sigma`) and per-channel chroma grain
   (`chroma_noise_sigma`), in 0-255 units, scaled by `request.config["temperature"]` when the
   setting gives one (a guess at how sampling temperature would matter, not a measurement);
6. compression: a JPEG round trip through Pillow at `jpeg_quality` (chroma subsampling 4:4:4
   unless `jpeg_subsampling` says otherwise).

Why each default, and what it reproduces. The paper (arXiv:2604.03400; docs/generation.md)
reports measured or observed facts about Nano Banana Pro chains; each default answers one of
them, none was chosen to make a metric look bad, and none was changed after looking at metric
scores. The defaults date from
version `simulated-v1` (set by eye on photographs); they were then checked, unchanged, against
the facts on sources like the paper's (`banana100.synth.GENERATED_SOURCES`: smooth, noise-free,
flat and textured areas), 1024 px wide, 100 replicate steps (`bench/generation/simulated_facts.py`,
numbers in `bench/results/generation/simulated_facts.json`):

- `noise_sigma`, `chroma_noise_sigma` <- "static noise grows step after step; people see it by
  steps 5-10". Measured as `grain_in_flat_areas` (new fine grain in the source's flat areas): 1.6-2.0
  grey levels at step 1, 3.2-3.7 at step 5, 4.3-5.0 at step 10, 6.6-7.3 at step 20; it first
  reaches 2 / 3 / 4 grey levels at steps 2 / 3-5 / 6-9. Where grain becomes visible is a few grey
  levels (`VISIBLE_GRAIN` = 3 is our assumption), so: REPRODUCED within that uncertainty. The
  split between luminance and colour grain is our choice; the paper does not report it.
- `resample_scale`, `resample_filter`, `soften` <- "the noise accumulates (later copies do not
  remove it)": each step's grain is carried into the next and shaped into static rather than
  pixel-level noise. The loss of fine detail they also cause is not a reported Nano Banana Pro fact.
- `drift_strength`, `drift_jitter` <- "a green tint". Measured tint (mean G minus mean of R and B,
  change since the source): +1.8 to +5.0 grey levels at step 10, +4.2 to +9.9 at step 20, +16 to
  +47 at step 100. REPRODUCED in direction; the paper gives no size, so the size is ours.
- `jpeg_quality` (92) <- NO reported fact: the paper does not say the copies are compressed. It
  stays on by default only because changing it would change every `simulated-v1` chain already
  made; pass `jpeg_quality=None` to leave it out. On the metrics it matters (it adds 8x8 block
  structure, which PIQE in particular measures).

Metric facts, same chains: "BRISQUE improved on a real chain (34.1 -> -9.8) while the noise grew":
PARTLY REPRODUCED. The drawn sources score badly (BRISQUE 55-95 at step 0; these step-0 scores
rest partly on exactly flat or linear windows, 6-57 % of them, where the score depends on rounding:
the engine's FlatRegionWarning; from step 1 on there are none) and the first copy's grain makes
them score much better (13.5-48 at step 1); from step 1 to step 5 BRISQUE improves again
on 4 of 6 sources, so it fails the protocol there; but unlike the real chain it then turns worse
(31-44 at step 20, 110-144 at step 100). "No pyiqa metric passes every chain": REPRODUCED on
these 6 chains for PIQE (failed 5), NIQE (failed 5) and BRISQUE (failed 4). On photographs
(skimage's samples, the `banana100 demo` set) NIQE and BRISQUE see the damage more often (BENCHMARKS.md,
"A newcomer's first hour", the
demo table: NIQE passed 3 of 4 chains, BRISQUE 2 of 4): the smooth sources matter.

NOT reproduced: copies that are cropped or change aspect ratio (the paper: almost always);
content redrawn, simplified or duplicated; scattered dots; noise that persists when the prompt
asks to remove it (the prompt is not read); mirroring or rotation that fails (here it always
succeeds); object additions; the model's reasoning (first mentioning the noise at steps 20-37);
differences between editors (Nano Banana 2 Fast's creases, FLUX.2's dots, Qwen's simplification).
Use this editor to test code and to illustrate the effect, never as data about a real model.

The output is a pure function of (input image, seed, config, constructor options): the same
inputs give bit-identical outputs on the same Pillow/libjpeg build. The editor holds no mutable
state and is safe to call from several threads.

Testing hook: the environment variable `BANANA100_SIMULATED_DELAY_S` (seconds, default 0) makes
each call sleep that long first, to imitate a slow remote editor (used by the interruption
tests). The `delay_s` constructor option overrides it.
"""

from __future__ import annotations

import io
import json
import os
import time

import numpy as np
from PIL import Image, ImageFilter

from banana100.imageio import load_rgb
from banana100.chains.editors.base import Editor, EditRequest, EditResult

DELAY_ENV = "BANANA100_SIMULATED_DELAY_S"

#: Grain (`grain_in_flat_areas`, grey levels) taken as "visible to people" on a flat area at 1:1.
#: An assumption, not a measurement: the threshold is a few grey levels, and where exactly it lies
#: depends on screen and viewer; bench/generation/simulated_facts.py reports the steps for 2, 3 and 4 levels.
VISIBLE_GRAIN = 3.0

# Direction of the per-step colour drift (R, G, B): toward green, a little away from magenta.
_DRIFT_GAIN = np.array([-0.5, 1.0, -0.8], dtype=np.float32)  # multiplicative, x drift_strength
_DRIFT_OFFSET = np.array([-0.3, 1.0, -0.5], dtype=np.float32)  # additive, x 100 x drift_strength

_FILTERS = {"lanczos": Image.LANCZOS, "bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR}


class SimulatedEditor(Editor):
    """Deterministic, fast stand-in editor that models copy-chain damage (see the module doc).

    Options (defaults in brackets; all damage is per step, in 0-255 grey levels where a unit
    applies):
      noise_sigma [2.0]: std of the luminance grain (the same value on R, G and B).
      chroma_noise_sigma [1.0]: std of the independent per-channel (colour) grain.
      resample_scale [(0.85, 0.97)]: range of the down-then-up resample factor, drawn per step
          from the seed; a single number fixes it; 1 disables resampling.
      resample_filter ["lanczos"]: "lanczos" (sharpening ringing), "bicubic" or "bilinear"
          (softer; with these the grain is smoothed away instead of building up).
      soften [0.03]: weight of a 3x3 box blur mixed into each pixel (0 disables).
      sharpen_percent [0]: extra unsharp-mask strength in percent (0 disables).
      sharpen_radius [1.0]: radius of that unsharp mask, pixels.
      drift_strength [0.0012]: pull toward green: channel gains move by about this fraction
          (G up, R and B down) and offsets by about 100x this many grey levels; negative values
          drift toward magenta.
      drift_jitter [0.0015]: std of the seeded random per-channel gain jitter.
      jpeg_quality [92]: JPEG round-trip quality 1-100; None disables the round trip.
      jpeg_subsampling ["4:4:4"]: chroma subsampling of that JPEG ("4:4:4", "4:2:2", "4:2:0").
      delay_s [None]: seconds to sleep before each step; None reads BANANA100_SIMULATED_DELAY_S
          (default 0). Not recorded: it changes no pixel.

    With the defaults, on sources like the paper's, fine grain in flat areas reaches 3 grey levels
    by steps 3-5 and 4 by steps 6-9, and the green tint grows from a few grey levels at step 10 to
    tens at step 100 (module doc; bench/generation/simulated_facts.py). One 512x512 step takes about 35-50 ms
    on one CPU core.
    """

    name = "simulated"
    model = "simulated-v1"

    def __init__(
        self,
        *,
        noise_sigma: float = 2.0,
        chroma_noise_sigma: float = 1.0,
        sharpen_percent: float = 0.0,
        sharpen_radius: float = 1.0,
        resample_scale: tuple[float, float] = (0.85, 0.97),
        resample_filter: str = "lanczos",
        soften: float = 0.03,
        drift_strength: float = 0.0012,
        drift_jitter: float = 0.0015,
        jpeg_quality: int | None = 92,
        jpeg_subsampling: str = "4:4:4",
        delay_s: float | None = None,
    ):
        for label, value in (
            ("noise_sigma", noise_sigma),
            ("chroma_noise_sigma", chroma_noise_sigma),
            ("sharpen_percent", sharpen_percent),
            ("sharpen_radius", sharpen_radius),
            ("drift_jitter", drift_jitter),
            ("soften", soften),
        ):
            if not value >= 0:
                raise ValueError(f"SimulatedEditor: {label} must be >= 0, got {value!r}")
        if isinstance(resample_scale, (int, float)):
            resample_scale = (resample_scale, resample_scale)
        lo, hi = (float(v) for v in resample_scale)
        if not 0 < lo <= hi <= 1:
            raise ValueError(
                f"SimulatedEditor: resample_scale must be (low, high) with 0 < low <= high <= 1, got {resample_scale!r}"
            )
        if resample_filter not in _FILTERS:
            raise ValueError(
                f"SimulatedEditor: resample_filter must be one of {sorted(_FILTERS)}, got {resample_filter!r}"
            )
        if jpeg_quality is not None and not 1 <= int(jpeg_quality) <= 100:
            raise ValueError(f"SimulatedEditor: jpeg_quality must be 1-100 or None, got {jpeg_quality!r}")
        if jpeg_subsampling not in ("4:4:4", "4:2:2", "4:2:0"):
            raise ValueError(
                f"SimulatedEditor: jpeg_subsampling must be 4:4:4, 4:2:2 or 4:2:0, got {jpeg_subsampling!r}"
            )
        if delay_s is None:
            raw = os.environ.get(DELAY_ENV, "").strip()
            try:
                delay_s = float(raw) if raw else 0.0
            except ValueError:
                raise ValueError(f"{DELAY_ENV} must be a number of seconds, got {raw!r}") from None
        if not delay_s >= 0:
            raise ValueError(f"SimulatedEditor: delay_s must be >= 0, got {delay_s!r}")
        self.noise_sigma = float(noise_sigma)
        self.chroma_noise_sigma = float(chroma_noise_sigma)
        self.sharpen_percent = float(sharpen_percent)
        self.sharpen_radius = float(sharpen_radius)
        self.resample_scale = (lo, hi)
        self.resample_filter = resample_filter
        self.soften = float(soften)
        self.drift_strength = float(drift_strength)
        self.drift_jitter = float(drift_jitter)
        self.jpeg_quality = None if jpeg_quality is None else int(jpeg_quality)
        self.jpeg_subsampling = jpeg_subsampling
        self.delay_s = float(delay_s)

    def parameters(self) -> dict:
        """The damage parameters (recorded in each step's `editor_info`)."""
        return {
            "noise_sigma": self.noise_sigma,
            "chroma_noise_sigma": self.chroma_noise_sigma,
            "sharpen_percent": self.sharpen_percent,
            "sharpen_radius": self.sharpen_radius,
            "resample_scale": list(self.resample_scale),
            "resample_filter": self.resample_filter,
            "soften": self.soften,
            "drift_strength": self.drift_strength,
            "drift_jitter": self.drift_jitter,
            "jpeg_quality": self.jpeg_quality,
            "jpeg_subsampling": self.jpeg_subsampling,
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.parameters().items())
        return f"SimulatedEditor({args})"

    # -- the model -------------------------------------------------------------------------

    def edit(self, request: EditRequest) -> EditResult:
        t0 = time.perf_counter()
        if self.delay_s:
            time.sleep(self.delay_s)
        image = load_rgb(request.image)
        transform = (request.simulate or {}).get("transform", "none")
        temperature = _temperature(request.config)
        out = self.apply(image, request.seed, transform=transform, temperature=temperature)
        info = {"simulated": True, "transform": transform, "temperature_scale": temperature, **self.parameters()}
        metadata = {
            "latency_s": round(time.perf_counter() - t0, 6),
            "finish_reason": "STOP",
            "attempts": 1,
            "editor_info": json.dumps(info, sort_keys=True),
            "generation_config": json.dumps(request.config or {}, sort_keys=True, default=str),
        }
        return EditResult(image=out, metadata=metadata)

    def apply(self, image: np.ndarray, seed: int, transform: str = "none", temperature: float = 1.0) -> np.ndarray:
        """One step of simulated damage on an HxWx3 uint8 array; returns a new uint8 array."""
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ValueError(f"expected an HxWx3 uint8 array, got {image.dtype} {image.shape}")
        rng = np.random.default_rng(int(seed) & ((1 << 64) - 1))

        if transform == "hflip":
            image = image[:, ::-1]
        elif transform == "rotate90":
            image = np.rot90(image)
        elif transform == "desaturate":
            image = _desaturate(image)
        elif transform == "recolor":
            image = _recolor(image)
        elif transform not in (None, "none"):
            raise ValueError(f"unknown simulate transform {transform!r} (none, hflip, rotate90, desaturate, recolor)")
        pil = Image.fromarray(np.ascontiguousarray(image))
        w, h = pil.size

        # Resampling softness, at a scale drawn per step (a fixed scale would stack its
        # aliasing pattern step after step into a visible grid).
        lo, hi = self.resample_scale
        scale = float(rng.uniform(lo, hi)) if hi > lo else lo
        if scale < 1:
            small = (max(1, round(w * scale)), max(1, round(h * scale)))
            if small != (w, h):
                pil = pil.resize(small, _FILTERS[self.resample_filter]).resize((w, h), _FILTERS[self.resample_filter])
        # A touch of 3x3 box blur that keeps the resampling's ringing from running away.
        if self.soften:
            kernel = [self.soften / 9.0] * 9
            kernel[4] += 1.0 - self.soften
            pil = pil.filter(ImageFilter.Kernel((3, 3), kernel, scale=1))
        # Sharpening, which also amplifies the grain of earlier steps.
        if self.sharpen_percent > 0 and self.sharpen_radius > 0:
            pil = pil.filter(ImageFilter.UnsharpMask(self.sharpen_radius, round(self.sharpen_percent), 0))

        x = np.array(pil, dtype=np.float32)
        # Colour drift toward green, with seeded jitter.
        gain = 1.0 + self.drift_strength * _DRIFT_GAIN
        if self.drift_jitter:
            gain = gain + rng.normal(0.0, self.drift_jitter, 3).astype(np.float32)
        x *= gain.astype(np.float32)
        x += (100.0 * self.drift_strength * _DRIFT_OFFSET).astype(np.float32)
        # Static noise: luminance grain (shared by the channels) + chroma grain (per channel).
        luma_sigma = np.float32(self.noise_sigma * temperature)
        chroma_sigma = np.float32(self.chroma_noise_sigma * temperature)
        if luma_sigma:
            luma = rng.standard_normal((h, w, 1), dtype=np.float32)
            luma *= luma_sigma
            x += luma
        if chroma_sigma:
            chroma = rng.standard_normal((h, w, 3), dtype=np.float32)
            chroma *= chroma_sigma
            x += chroma
        x += np.float32(0.5)  # round half up on the truncating cast below
        np.clip(x, 0, 255, out=x)
        out = x.astype(np.uint8)

        # Compression.
        if self.jpeg_quality is not None:
            buf = io.BytesIO()
            Image.fromarray(out).save(buf, format="JPEG", quality=self.jpeg_quality, subsampling=self.jpeg_subsampling)
            buf.seek(0)
            with Image.open(buf) as jpg:
                out = np.array(jpg.convert("RGB"))
        return np.ascontiguousarray(out)


def _desaturate(image: np.ndarray) -> np.ndarray:
    """Greyscale (ITU-R 601 luma) kept as three equal channels."""
    luma = image.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    grey = np.clip(luma + 0.5, 0, 255).astype(np.uint8)
    return np.repeat(grey[:, :, None], 3, axis=2)


def _recolor(image: np.ndarray) -> np.ndarray:
    """An APPROXIMATION of "restore the colours": the model cannot know the lost colours, so it
    keeps the image's luma and lays a fixed warm tint over it (0.6 of the way to a sepia-like
    ramp). Only its colourlessness-then-colour rhythm resembles the real setting."""
    x = image.astype(np.float32)
    luma = x @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    tint = np.stack([luma * 1.08 + 6, luma * 0.98 + 2, luma * 0.82], axis=2)
    out = 0.4 * x + 0.6 * tint
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


def _temperature(config: dict | None) -> float:
    """Noise scale from a setting's `temperature` (1.0 when absent; clamped to [0, 4])."""
    value = (config or {}).get("temperature")
    if value is None:
        return 1.0
    try:
        t = float(value)
    except (TypeError, ValueError):
        return 1.0
    return min(max(t, 0.0), 4.0)


def grain_in_flat_areas(source: np.ndarray, image: np.ndarray, flat_gradient: float = 0.5) -> float:
    """How much new fine grain `image` has where `source` is flat, in grey levels (a std).

    Luminance (ITU-R 601) minus its Gaussian blur (sigma 1.5 px) is each image's high-frequency
    part; the measure is the std of the image's minus the source's, over the pixels where the
    source's smoothed gradient is below `flat_gradient` grey levels per pixel (sky, walls,
    gradients: where people see grain first). Used to check the editor against the paper's
    "people see the noise by steps 5-10" (bench/generation/simulated_facts.py); NaN without flat areas.
    """
    from scipy.ndimage import gaussian_filter

    if source.shape != image.shape:
        raise ValueError(f"source and image differ in shape: {source.shape} vs {image.shape}")
    weights = np.array([0.299, 0.587, 0.114])
    y0, y1 = source.astype(np.float64) @ weights, image.astype(np.float64) @ weights
    flat = np.hypot(*np.gradient(gaussian_filter(y0, 2.0))) < flat_gradient
    if not flat.any():
        return float("nan")
    new = (y1 - gaussian_filter(y1, 1.5)) - (y0 - gaussian_filter(y0, 1.5))
    return float(new[flat].std())


def tint(image: np.ndarray) -> float:
    """Mean green minus the mean of red and blue, in grey levels (positive: greenish)."""
    m = image.reshape(-1, 3).astype(np.float64).mean(axis=0)
    return float(m[1] - (m[0] + m[2]) / 2)
