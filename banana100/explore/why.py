"""Why it fails: what changed in the image since the reference step, and what NIQE and BRISQUE
look at (the MSCN map and the shape of its histogram), beside the edit-damage detector's terms."""

from __future__ import annotations

import numpy as np
from PIL import Image


WHY_CROP = 320  # the view shows a 1:1 crop this large: shrinking would average the grain away


def _luma(rgb: np.ndarray):
    """HxWx3 uint8 -> 1x1xHxW float64 luminance, MATLAB rgb2gray (what the originals compute on)."""
    import torch

    from banana100.metrics.native import matlab

    x = torch.from_numpy(np.array(rgb, dtype=np.uint8)).permute(2, 0, 1).unsqueeze(0)  # a copy: torch wants writable
    return matlab.rgb2gray(x, uint8=True)


def _flattest_box(y: np.ndarray, size: int) -> tuple[int, int]:
    """Top-left corner of the size x size window (of a 3x3 grid) with the least gradient energy."""
    h, w = y.shape
    gy, gx = np.gradient(y)
    energy = gx * gx + gy * gy
    best, corner = None, (0, 0)
    for top in np.linspace(0, h - size, 3).astype(int):
        for left in np.linspace(0, w - size, 3).astype(int):
            e = float(energy[top:top + size, left:left + size].mean())
            if best is None or e < best:
                best, corner = e, (int(top), int(left))
    return corner


def why_view(reference: np.ndarray, image: np.ndarray, crop: int = WHY_CROP, source: np.ndarray | None = None) -> dict:
    """What a visitor needs to see why the metrics miss the damage, for one step.

    `reference` is step 1 (the protocol's reference), `image` the chosen step, HxWx3 uint8.
    Returns PIL images of one 1:1 crop (the flattest part of step 1, where grain shows first):
    `crop` (the step), `residual` (its high-frequency part minus step 1's: luminance minus its
    7x7 Gaussian local mean, x4 around mid-grey; what changed since step 1) and `mscn` (the
    step's mean-subtracted contrast-normalised coefficients, the map NIQE and BRISQUE compute
    all their features from, `banana100.metrics.native.nss.mscn`), plus `alpha` (shape of the
    generalised Gaussian fitted to the whole image's MSCN coefficients at step 1 and at this
    step, as those metrics fit it: 2 is Gaussian noise, small values a peaky, smooth image),
    `mscn_values` (a sample of both, for the histogram) and `box` (top, left, size) of the crop.
    With `source` (step 0) its shape and sample come too (`source_alpha`, `source_values`).
    A reference of another size (real copies are often cropped) is resized to the step's size first.
    """
    from banana100.metrics.native import matlab, nss

    if reference.shape != image.shape:
        reference = np.asarray(Image.fromarray(reference).resize(image.shape[1::-1], Image.LANCZOS))
    window = matlab.fspecial_gaussian(7, 7 / 6)
    out = {}
    maps = {}
    for name, rgb in (("reference", reference), ("image", image)):
        y = _luma(rgb)[0, 0]
        mu = matlab.imfilter(y, window, "replicate")
        maps[name] = (y, y - mu, nss.mscn(y, window, "replicate"))
    h, w = image.shape[:2]
    size = min(crop, h, w)
    top, left = _flattest_box(maps["reference"][0].numpy(), size)
    box = (slice(top, top + size), slice(left, left + size))

    def grey(x: np.ndarray, gain: float) -> Image.Image:
        return Image.fromarray(np.clip(128 + gain * x + 0.5, 0, 255).astype(np.uint8))

    out["crop"] = Image.fromarray(np.ascontiguousarray(image[box]))
    out["residual"] = grey((maps["image"][1] - maps["reference"][1]).numpy()[box], 4.0)
    out["mscn"] = grey(maps["image"][2].numpy()[box], 40.0)
    alphas, values = [], []
    rng = np.random.default_rng(0)
    for name in ("reference", "image"):
        m = maps[name][2].reshape(1, -1)
        alphas.append(float(nss.estimate_ggd(m)[0][0]))
        flat = m[0].numpy()
        values.append(flat[rng.choice(flat.size, min(flat.size, 200_000), replace=False)])
    out["alpha"] = tuple(alphas)
    out["mscn_values"] = tuple(values)
    out["box"] = (top, left, size)
    out["damage"] = _damage_components(reference, image)
    if source is not None:
        m = nss.mscn(_luma(source)[0, 0], window, "replicate").reshape(1, -1)
        out["source_alpha"] = float(nss.estimate_ggd(m)[0][0])
        flat = m[0].numpy()
        out["source_values"] = flat[rng.choice(flat.size, min(flat.size, 200_000), replace=False)]
    return out


def _damage_components(reference: np.ndarray, image: np.ndarray) -> dict | None:
    """The edit_damage detector's score and components at the reference step and at this step:
    {"score": (ref, step), component: (ref, step), ...}; None for images under its minimum size."""
    from banana100.metrics.engine.scorer import to_tensor
    from banana100.metrics.detector import model as edit_damage

    if min(image.shape[:2]) < edit_damage.MIN_SIDE:
        return None
    model = edit_damage.build()
    out: dict[str, list[float]] = {}
    for rgb in (reference, image):
        score = float(model(to_tensor(rgb)[None])[0])
        out.setdefault("score", []).append(score)
        for name, value in model.last_components.items():
            out.setdefault(name, []).append(float(value[0]))
    return {k: tuple(v) for k, v in out.items()}


def damage_table(damage: dict | None, reference_step: int, step: int) -> str:
    """The detector's components at both steps as a markdown table (empty without them)."""
    if not damage:
        return ""
    from banana100.metrics.detector.model import COMPONENT_UNITS as units
    from banana100.metrics.detector.model import terms

    rows = [f"| what | step {reference_step} | step {step} |", "| --- | --- | --- |"]
    for name, (a, b) in damage.items():
        label = "**edit damage** (sum of the terms)" if name == "score" else f"{name} ({units.get(name, '').split(';')[0].split(':')[0]})"
        rows.append(f"| {label} | {a:.3g} | {b:.3g} |")
    before, after = (terms({c: damage[c][i] for c in units}) for i in (0, 1))
    grew = {c: after[c] - before[c] for c in before}
    main = max(grew, key=grew.get)  # what changed since the reference step, not what the image is
    return ("\n\nThe edit-damage detector (`metrics/edit_damage`, higher = more damage) on the whole image:\n\n"
            + "\n".join(rows) + f"\n\nIts term that grew most from step {reference_step} to step {step}: "
            f"**{main}** ({grew[main]:+.2f}).")


def plot_mscn_histograms(view: dict, reference_step: int, step: int):
    """Histograms of the MSCN coefficients at the reference step and at `step` (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 3.0), dpi=100)
    bins = np.linspace(-3, 3, 121)
    series = list(zip(view["mscn_values"], view["alpha"], (f"step {reference_step}", f"step {step}"),
                      ("0.45", "crimson"), strict=True))
    if "source_values" in view:
        series.insert(0, (view["source_values"], view["source_alpha"], "step 0 (source)", "tab:blue"))
    for values, alpha, label, colour in series:
        ax.hist(values, bins=bins, density=True, histtype="step", lw=1.8, color=colour,
                label=f"{label}: shape {alpha:.2f}")
    ax.set_yscale("log")
    ax.set_xlabel("MSCN coefficient")
    ax.set_ylabel("density (log)")
    ax.set_title("What NIQE and BRISQUE measure: the shape of this histogram", fontsize=9)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="GGD fit",
              title_fontsize=8)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig
