"""Validate the edit_damage detector on what this toolkit does not make; write every figure.

    nice python -m bench.detector.validate_edit_damage [--out banana100/metrics/detector/data/edit_damage_validation.json]
        [--part ladders,clean,protocol,heldout,fresh,sixth,seventh,signatures,signatures2,...,other_metrics,other_metrics_model_b]
        [--chain-steps 20] [--chain-side 256] [--heldout-side 384]
        [--damage-scale 1 --signatures creases,speckles,simplified,jpeg]  # (e) only; write those to another --out

(a) ladders: white noise, spatially correlated grain, a periodic grid, JPEG, Gaussian blur and a
    green tint at known strengths on varied photographs (skimage.data's, the reference images in
    ../shared/reference-images when present, and the photographs that ship in installed packages,
    PACKAGE_PHOTOGRAPHS): Spearman's rho of the score against the strength, per image and ladder.
(b) clean content of every kind (photographs, smooth generated-looking images, dense texture,
    text, flat graphics) against the same images with a stand-in for the step-5 effect (noise at
    about its visibility threshold, a faint lattice, a slight green tint): the ROC AUC of clean
    vs damaged across images (a filter judges one image without its chain), per damage and
    pooled, for the score and for each component alone.
    The reference photographs (../shared/reference-images; left out with a message when absent)
    and the package photographs are reported on their own in (a) and (b).
(c) the paper's protocol on chains of the simulated editor, every setting, for the bare score
    and for edit_damage_rel (against step 0), and the AUCs across chains (step 1 vs step 10;
    the bare score's clean step 0 vs step 10).
(d) held out: chains of a second damage model (bench/detector/damage_model_b.py: shifts and crops, a
    lattice, correlated grain, a magenta or blue drift, pasted content; none of it in the
    simulated editor) from drawn sources, the reference photographs, skimage images and the
    package photographs, by group and for every photograph together: the same figures as (c).
    Four draws (chain and drawn-source seeds, DRAWS), each under its own key.
    Part `fresh`: a fifth draw of (d), on other photographs (FRESH_DRAW): the 23 photographs of Debian's
    mate-backgrounds and plasma-workspace-wallpapers (DISTRIBUTION_PHOTOGRAPHS) beside drawn sources of
    their own seed. Scored once, for the shipped setting. When any of them is not installed (`apt-get
    install mate-backgrounds plasma-workspace-wallpapers`), the part is skipped, said, and the recorded
    draw kept: a draw without them would be another draw under the same name.
    Part `sixth`: a sixth draw (SIXTH_DRAW), on 14 photographs of Ubuntu's wallpapers as Debian's
    lomiri-wallpapers-16.04 and lomiri-wallpapers-20.04 ship them, found after the evenness refit and
    scored once, after it was fixed; skipped the same way when they are not installed.
    Part `seventh`: a seventh draw (SEVENTH_DRAW) on the renders made outside this repository (DISTRIBUTION_RENDERS:
    Debian's ukui-wallpapers and gnome-backgrounds), smooth gradients among them; skipped the same way.
    Part `eighth`: an eighth draw (EIGHTH_DRAW) on the 25 photographs of the signature draws' packages (Plasma's and
    Ubuntu's wallpapers, JPEGs with periodic content of their own), made after version 12 counted a lattice told the
    source beyond a quarter of the source's own, and scored once; skipped the same way.
(e) held out: the other editors' signatures (bench/detector/signatures.py), a part per draw (`signatures`,
    `signatures2`, ...: evidence.SIGNATURE_DRAWS), each signature's chains from drawn renders and photographs;
    from the thirteenth draw on, also every render of the draw's `outside` packages (DISTRIBUTION_RENDERS: Debian's
    ukui-wallpapers and gnome-backgrounds), made outside this repository. Skipped the same way when a package is
    not installed.
    Part `other_metrics` (not run by default): the chains of the last held-out signature draw
    (evidence.SIGNATURE_HELD_OUT) made again and scored by the paper's hand-crafted metrics (OTHER_METRICS, or
    --other-metrics; NIQE, BRISQUE and IL-NIQE need their parameter files: BANANA100_WEIGHTS=../shared/iqa-params),
    each in its own worse direction: the card sets them beside edit_damage on the same chains. Part
    `other_metrics_model_b` (not run by default either): the same for (d)'s eighth draw, damage model B's.

Nothing is tuned here: the detector's constants are fixed in banana100/metrics/detector/model.py
and edit_damage_rel.py.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import skimage.data
from PIL import Image, ImageDraw, ImageFont
from scipy.ndimage import gaussian_filter
from scipy.stats import spearmanr

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import REPO, SHARED, write_results

from banana100.metrics.engine.scorer import MetricScorer
from banana100.metrics.detector.evidence import FRESH_KEY, HELDOUT_DRAWS, auc, PHOTOGRAPH_DRAWS, PHOTOGRAPHS, SIXTH_KEY
from banana100.metrics.detector.evidence import (EIGHTH_KEY, OTHER_METRICS_KEY, OTHER_METRICS_MODEL_B_KEY,
                                                 OUTSIDE_RENDERS, RENDER_DRAWS, RENDERS, SEVENTH_KEY, SIGNATURE_DRAWS,
                                                 SIGNATURE_HELD_OUT, signature_draw, signature_draw_of)
from banana100.metrics.detector import model as ed
from banana100.metrics.detector import relative as rel
from banana100.metrics.detector.model import COMPONENTS

REFERENCE_IMAGES = SHARED / "reference-images"
RECORD_MAX_SIDE = 512  # larger images are shrunk (Lanczos) first: same content, bounded time
MAX_SIDE = RECORD_MAX_SIDE  # this process's (main's --max-side)


def as_rgb(a: np.ndarray) -> np.ndarray:
    if a.dtype == bool:
        a = a.astype(np.uint8) * 255
    if a.ndim == 2:
        a = np.stack([a] * 3, -1)
    if a.shape[-1] == 4:  # composite on white
        alpha = a[..., 3:4] / 255.0
        a = (a[..., :3] * alpha + 255 * (1 - alpha)).round().astype(np.uint8)
    return _fit(np.ascontiguousarray(a[..., :3]))


def _set_max_side(side: int) -> None:
    """MAX_SIDE for this process (the command line's --max-side), read by _fit at each call; the renders decoded
    at another size are forgotten."""
    global MAX_SIDE
    if side != MAX_SIDE:
        _decoded_renders.cache_clear()
    MAX_SIDE = side


def _fit(a: np.ndarray) -> np.ndarray:
    h, w = a.shape[:2]
    if max(h, w) <= MAX_SIDE:
        return a
    s = MAX_SIDE / max(h, w)
    return np.asarray(Image.fromarray(a).resize((round(w * s), round(h * s)), Image.LANCZOS))


# reference images that are distorted copies, not photographs as taken: counted clean, they would make
# the detector's right answer a wrong one (clean-vs-damaged AUC, ladders' strength 0, chains' step 0)
DISTORTED_REFERENCES = {
    # pepper_1..4 are distorted copies of pepper_0 (IL-NIQE's README scores them 37-78 against 29)
    **{f"ilniqe/pepper_{i}.png": "a distorted copy of pepper_0" for i in range(1, 5)},
    # TID2013's I03 is one of its distorted images, a heavy blur (official PIQE 100, BRISQUE 94.6 in
    # tid2013/official_scores.csv); it had been a "clean" source of the held-out chains until the
    # component table showed its softness term at 6.1 (docs/edit-damage.md). I04 (BRISQUE -0.1) stays.
    "tid2013/I03.bmp": "a TID2013 distorted image (heavy blur)",
}


# Clean photographs as taken (JPEG, sensor noise, warm light and all) that ship inside packages the dev
# set-up installs: (distribution, path in it). No fit has seen them (bench/detector/fit_edit_damage.py leaves them
# out); they joined the held-out sources of (d) before its fourth draw, which widens the photographs there
# from 7 to 22. TID2013's I04 of pyiqa's ResultsCalibra is left out: its scene is a reference image already.
PACKAGE_PHOTOGRAPHS = {
    "grace_hopper": ("matplotlib", "matplotlib/mpl-data/sample_data/grace_hopper.jpg"),
    "motorcycle": ("scikit-image", "skimage/data/motorcycle_left.png"),
    "cheetah": ("gradio", "gradio/media_assets/images/cheetah.jpg"),
    "cheetah1": ("gradio", "gradio/media_assets/images/cheetah1.jpg"),
    "lion": ("gradio", "gradio/media_assets/images/lion.jpg"),
    "groot": ("gradio", "gradio/media_assets/images/groot.jpeg"),
    "tower": ("gradio", "gradio/media_assets/images/tower.jpg"),
    **{f"kodak_{n}": ("pyiqa", f"ResultsCalibra/ref_dir/{n}.bmp") for n in ("I03", "I06", "I08", "I19")},
    "spaq_night": ("pyiqa", "tests/test_efficiency_img_dir/SPAQ_10241.jpg"),
    **{f"video_frame_{i}": ("pyiqa", f"tests/test_efficiency_img_dir/frame_{k}.jpg")
       for i, k in enumerate(("4wrwr48cdk6rbcjl", "7gzdcz9sif0ekg31", "9ogwhvvy7gfj6jzh"))},
}


def package_photographs() -> dict[str, np.ndarray]:
    """PACKAGE_PHOTOGRAPHS as RGB arrays (at most MAX_SIDE px); those whose distribution is not installed
    are left out, and said."""
    from importlib.metadata import PackageNotFoundError, distribution

    out = {}
    for name, (dist, path) in PACKAGE_PHOTOGRAPHS.items():
        try:
            f = Path(distribution(dist).locate_file(path))
        except PackageNotFoundError:
            f = None
        if f is None or not f.is_file():
            print(f"{path} of {dist!r} is not installed: held-out photograph {name!r} is left out", flush=True)
            continue
        out[name] = as_rgb(np.asarray(Image.open(f).convert("RGB")))
    return out


def photographs() -> dict[str, np.ndarray]:
    names = ["astronaut", "coffee", "chelsea", "rocket", "camera", "immunohistochemistry", "hubble_deep_field",
             "retina", "coins", "clock", "moon"]
    out = {n: as_rgb(getattr(skimage.data, n)()) for n in names}
    if not REFERENCE_IMAGES.is_dir():
        print(f"{REFERENCE_IMAGES} is absent: the reference photographs are left out", flush=True)
    else:
        for p in sorted(REFERENCE_IMAGES.rglob("*")):
            if p.suffix.lower() in (".png", ".bmp", ".gif") and f"{p.parent.name}/{p.name}" not in DISTORTED_REFERENCES:
                out[f"ref:{p.parent.name}/{p.name}"] = as_rgb(np.asarray(Image.open(p).convert("RGB")))
    out.update({f"pkg:{n}": a for n, a in package_photographs().items()})
    return out



def _smooth_synthetic(seed: int, side: int = 384) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:side, 0:side] / side
    img = np.zeros((side, side, 3))
    for c in range(3):
        img[..., c] = 60 + 120 * (rng.random() * xx + rng.random() * yy) / 2
    for _ in range(6):  # soft blobs: the airbrushed look of generated images
        cy, cx, r = rng.random(), rng.random(), 0.05 + 0.2 * rng.random()
        col = rng.uniform(-80, 80, 3)
        img += col * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))[..., None]
    return img.clip(0, 255).round().astype(np.uint8)


def _text_image(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    im = Image.new("RGB", (512, 384), "white")
    d = ImageDraw.Draw(im)
    try:
        font = ImageFont.load_default(size=18)
    except TypeError:  # Pillow < 10.1
        font = ImageFont.load_default()
    words = "the quick brown fox jumps over a lazy dog while editors copy images again and again".split()
    for row in range(16):
        d.text((12, 10 + 23 * row), " ".join(rng.choice(words, 7)), fill="black", font=font)
    return np.asarray(im)


def _flat_graphic(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    im = Image.new("RGB", (448, 448), tuple(int(v) for v in rng.integers(0, 256, 3)))
    d = ImageDraw.Draw(im)
    for _ in range(10):
        x0, y0 = rng.integers(0, 380, 2)
        x1, y1 = x0 + rng.integers(20, 200), y0 + rng.integers(20, 200)
        col = tuple(int(v) for v in rng.integers(0, 256, 3))
        (d.rectangle if rng.random() < 0.5 else d.ellipse)([int(x0), int(y0), int(x1), int(y1)], fill=col)
    return np.asarray(im)


def _water(seed: int, side: int = 448) -> np.ndarray:
    """Water-like ripples: a few travelling waves of random direction and length over smooth shading."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:side, 0:side].astype(float)
    h = np.zeros((side, side))
    for _ in range(8):
        th, lam = rng.uniform(0, np.pi), rng.uniform(6, 40)
        h += np.cos(2 * np.pi * (xx * np.cos(th) + yy * np.sin(th)) / lam + rng.uniform(0, 6.3)) / 8
    shade = gaussian_filter(rng.normal(size=(side, side)), 30)
    shade /= shade.std() + 1e-9
    base = np.array([30, 90, 140.0])
    img = base + (25 * h + 15 * shade)[..., None] * np.array([0.6, 0.9, 1.0])
    return img.clip(0, 255).round().astype(np.uint8)


def clean_set() -> dict[str, dict[str, np.ndarray]]:
    photos = photographs()
    from skimage.restoration import denoise_tv_chambolle

    smooth = {f"tv-smoothed {n}": (denoise_tv_chambolle(photos[n] / 255.0, weight=0.12, channel_axis=-1) * 255)
              .round().astype(np.uint8) for n in ("astronaut", "coffee", "chelsea")}
    smooth.update({f"soft blobs {s}": _smooth_synthetic(s) for s in range(3)})
    chelsea = skimage.data.chelsea()
    texture = {n: as_rgb(getattr(skimage.data, n)()) for n in ("grass", "gravel", "brick")}
    texture["fur (chelsea, x2 crop)"] = np.asarray(Image.fromarray(chelsea[40:200, 60:260]).resize((400, 320), Image.LANCZOS))
    texture.update({f"water ripples {s}": _water(s) for s in range(2)})
    text = {"page": as_rgb(skimage.data.page()), "text": as_rgb(skimage.data.text())}
    text.update({f"rendered text {s}": _text_image(s) for s in range(2)})
    flat = {n: as_rgb(getattr(skimage.data, n)()) for n in ("logo", "colorwheel", "checkerboard", "horse")}
    flat.update({f"flat shapes {s}": _flat_graphic(s) for s in range(3)})
    # the reference and the package photographs are reported on their own
    refs = {n: photos.pop(n) for n in [n for n in photos if n.startswith("ref:")]}
    package = {n: photos.pop(n) for n in [n for n in photos if n.startswith("pkg:")]}
    out = {"photograph": photos, "smooth": smooth, "texture": texture, "text": text, "flat graphics": flat}
    return {**out, **({"reference-images": refs} if refs else {}), **({"package photographs": package} if package else {})}


# --- degradations at known strengths -------------------------------------------------------

def _add(a: np.ndarray, field: np.ndarray) -> np.ndarray:
    if field.ndim == 2:
        field = field[..., None]
    return np.clip(a.astype(np.float64) + field, 0, 255).round().astype(np.uint8)


def white(a, sigma, seed=0):
    return _add(a, np.random.default_rng(seed).normal(0, sigma, a.shape[:2])) if sigma else a


def correlated(a, sigma, seed=0, length=1.5):
    if not sigma:
        return a
    n = gaussian_filter(np.random.default_rng(seed).normal(size=a.shape[:2]), length)
    return _add(a, n / n.std() * sigma)


def grid(a, amplitude, period=8):
    if not amplitude:
        return a
    yy, xx = np.mgrid[0:a.shape[0], 0:a.shape[1]]
    return _add(a, amplitude * (np.cos(2 * np.pi * xx / period) + np.cos(2 * np.pi * yy / period)) / 2)


def jpeg(a, quality):
    if quality is None:
        return a
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, "JPEG", quality=int(quality))
    return np.asarray(Image.open(buf).convert("RGB"))


# a crop after saving, as a user's of a saved JPEG: no multiple of 8 px on either axis, so the blocks' grid no longer
# starts at the image's corner (the clean rung is cropped alike)
CROP_AFTER_SAVING = (3, 5)  # px off the top, off the left


def jpeg_cropped(a, quality):
    top, left = CROP_AFTER_SAVING
    return jpeg(a, quality)[top:, left:]


def blur(a, sigma):
    if not sigma:
        return a
    return np.stack([gaussian_filter(a[..., c].astype(np.float64), sigma) for c in range(3)], -1).round().astype(np.uint8)


def green_tint(a, gain):
    g = np.array([1 / np.sqrt(gain), gain, 1 / np.sqrt(gain)])
    return np.clip(a * g, 0, 255).round().astype(np.uint8)


LADDERS = {  # name -> (function, strengths in increasing damage, what the strength is)
    "white noise": (white, [0, 1, 2, 4, 8], "standard deviation, 8-bit levels"),
    "correlated grain": (correlated, [0, 1, 2, 4, 8], "standard deviation of white noise blurred by sigma 1.5 px"),
    "periodic grid": (grid, [0, 1, 2, 4, 8], "amplitude (levels) of a period-8 cosine grid"),
    "jpeg": (jpeg, [None, 90, 70, 50, 30, 10], "quality (None = the clean image)"),
    "jpeg, cropped after saving": (jpeg_cropped, [None, 90, 70, 50, 30, 10],
                                   "quality, then 3 px off the top and 5 off the left (None = the clean image, cropped)"),
    "blur": (blur, [0, 0.5, 1, 2, 3], "Gaussian sigma, px"),
    "green tint": (green_tint, [1, 1.02, 1.05, 1.1, 1.2], "green gain (red and blue divided by its root)"),
}
# Our stand-in for the step-5 effect (no real chain is at hand): each damage at about the level
# where it becomes visible, per the reports quoted in the card.
STEP5 = {
    "white noise 3": lambda a: white(a, 3, seed=5),
    "correlated grain 3": lambda a: correlated(a, 3, seed=5),
    "lattice 2": lambda a: grid(a, 2),
    "green tint 1.04": lambda a: green_tint(a, 1.04),
}


def score(scorer: MetricScorer, images: list[np.ndarray]) -> tuple[list[float], list[dict]]:
    scored = scorer.measure(images, [f"image {i}" for i in range(len(images))])
    return scored.values(), list(scored.components)


def auc_interval(neg: list[float], pos: list[float], draws: int = 2000, seed: int = 0) -> list[float]:
    """A 95 % bootstrap interval of auc(neg, pos), resampling chains (neg[i] and pos[i] are chain i's):
    with 14 chains one AUC is a rough figure, and this says how rough."""
    rng = np.random.default_rng(seed)
    neg, pos = np.asarray(neg), np.asarray(pos)
    out = []
    for _ in range(draws):
        i = rng.integers(0, len(neg), len(neg))
        d = pos[i][:, None] - neg[i][None, :]
        out.append(float(np.mean((d > 0) + 0.5 * (d == 0))))
    return [float(np.percentile(out, 2.5)), float(np.percentile(out, 97.5))]


def part_ladders(scorer) -> dict:
    photos = photographs()
    out = {}
    for ladder, (fn, strengths, unit) in LADDERS.items():
        rows = []
        for name, a in photos.items():
            s, comps = score(scorer, [fn(a, k) for k in strengths])
            rho = spearmanr(range(len(s)), s).statistic
            rows.append({"image": name, "scores": s, "rho": float(rho), "rises": bool(s[-1] > s[0]),
                         "monotone": bool(all(y >= x for x, y in zip(s, s[1:], strict=False))),
                         "components": {c: [d[c] for d in comps] for c in COMPONENTS}})
        out[ladder] = {"strengths": strengths, "unit": unit, "images": rows,
                       "mean_rho": float(np.mean([r["rho"] for r in rows])),
                       "share_monotone": float(np.mean([r["monotone"] for r in rows])),
                       "share_rises": float(np.mean([r["rises"] for r in rows]))}
        print(f"(a) {ladder}: mean rho {out[ladder]['mean_rho']:.2f}, monotone {out[ladder]['share_monotone']:.0%}, "
              f"last > first {out[ladder]['share_rises']:.0%}", flush=True)
    return out


def part_clean(scorer) -> dict:
    sets = clean_set()
    clean, comps_clean, names, kinds = [], [], [], []
    for kind, imgs in sets.items():
        s, c = score(scorer, list(imgs.values()))
        clean += s
        comps_clean += c
        names += list(imgs)
        kinds += [kind] * len(imgs)
    images = [a for imgs in sets.values() for a in imgs.values()]
    damaged = {}
    for dname, fn in STEP5.items():
        s, c = score(scorer, [fn(a) for a in images])
        damaged[dname] = (s, c)
    pooled = [v for s, _ in damaged.values() for v in s]
    by_kind = {k: [i for i, kk in enumerate(kinds) if kk == k] for k in sets}
    result = {
        # each kind of content alone: its clean images against the same images damaged (every stand-in)
        "auc_by_kind": {k: auc([clean[i] for i in idx], [s[i] for s, _ in damaged.values() for i in idx])
                        for k, idx in by_kind.items() if idx},
        "clean": [{"image": n, "kind": k, "score": s, **{c: d[c] for c in COMPONENTS}}
                  for n, k, s, d in zip(names, kinds, clean, comps_clean, strict=True)],
        "per_kind": {k: {"n": kinds.count(k), "min": min(s for s, kk in zip(clean, kinds, strict=True) if kk == k),
                         "median": float(np.median([s for s, kk in zip(clean, kinds, strict=True) if kk == k])),
                         "max": max(s for s, kk in zip(clean, kinds, strict=True) if kk == k)} for k in sets},
        "damaged": {d: {"median": float(np.median(s)), "auc": auc(clean, s),
                        "auc_components": {c: auc([x[c] for x in comps_clean], [x[c] for x in cc]) for c in COMPONENTS},
                        "scores": s}
                    for d, (s, cc) in damaged.items()},
        "pooled_auc": auc(clean, pooled),
        "clean_p90": float(np.percentile(clean, 90)),
        "damaged_median": float(np.median(pooled)),
    }
    # the clean images that score above the median damaged image: what a threshold there would flag
    result["clean_above_damaged_median"] = [n for n, s in zip(names, clean, strict=True) if s > result["damaged_median"]]
    print(f"(b) clean vs step-5 stand-in: pooled AUC {result['pooled_auc']:.3f}; "
          + ", ".join(f"{d} {v['auc']:.3f}" for d, v in result["damaged"].items()), flush=True)
    return result


def _bare(stats: dict) -> float:
    return sum(ed.terms(stats).values())


def metric_figures(score: dict[str, dict[int, float]], lower_better: bool = True, clean: bool = True,
                   check_steps=(5, 10, 20)) -> dict:
    """The protocol and the AUCs across chains of one score ({chain: {step: score}}, `lower_better` as the metric
    reads): chains failed, and ROC AUC step 1 vs step 10 and, with `clean`, step 0 vs step 10, each with the
    worse score counted as the higher."""
    from banana100.protocol import sensitivity

    worse = {c: {k: v if lower_better or v is None else -v for k, v in d.items()} for c, d in score.items()}
    flat = [(c, k, v) for c, d in score.items() for k, v in d.items() if k >= 1]
    p = sensitivity([v for _, _, v in flat], [k for _, k, _ in flat], [c for c, _, _ in flat], lower_better=lower_better,
                    check_steps=check_steps)
    out = {"n_chains": p["n_chains"], "n_failed": p["n_failed"], "mean_rho": p["mean_rho"],
           "failed_chains": [c["chain_id"] for c in p["per_chain"] if c["passed"] is False]}
    if p["n_incomplete"]:  # a metric that gives some image no score (None): those chains neither pass nor fail
        out.update(n_incomplete=p["n_incomplete"], incomplete_chains=p["incomplete_chains"])

    def auc_of(a: int, b: int) -> float:  # across chains, those with both steps scored
        both = [d for d in worse.values() if d[a] is not None and d[b] is not None]
        return auc([d[a] for d in both], [d[b] for d in both])

    # across chains: does step 10 of any chain score worse than step 1 of any other?
    out["auc_step1_vs_step10"] = auc_of(1, 10)
    out["scores"] = {c: {str(k): v for k, v in d.items()} for c, d in score.items()}
    if clean:  # one image alone: the clean source against a step-10 copy of another
        out["auc_clean_vs_step10"] = auc_of(0, 10)
    return out


def _chain_figures(chains: dict[str, dict[int, dict]], check_steps=(5, 10, 20)) -> dict:
    """Protocol and AUCs of the bare and the relative score over chains ({chain: {step: stats}})."""
    out = {}
    for kind in ("bare", "relative"):
        score = {c: {k: (_bare(s) if kind == "bare" else rel.relative_score(s, st[0])) for k, s in st.items()}
                 for c, st in chains.items()}
        out[kind] = metric_figures(score, clean=kind == "bare", check_steps=check_steps)
        if kind == "bare":
            out[kind]["auc_clean_vs_step10_ci95"] = auc_interval([d[0] for d in score.values()],
                                                                 [d[10] for d in score.values()])
            out[kind]["auc_clean_vs_step10_components"] = {
                c: auc([st[0][c] for st in chains.values()], [st[10][c] for st in chains.values()]) for c in COMPONENTS}
    return out


# Seeds of the held-out chains and of the drawn sources. Development looked at other seeds (chain
# seeds 0-13, drawn sources seed 0, which bench/detector/fit_edit_damage.py fits on) only. The first draw was
# scored for each candidate form named in docs/edit-damage-history.md; the second was drawn after the fit's data
# and form were fixed, and scored for the three last settings of its grid (docs/edit-damage-history.md).
# The third (seeds 300/3) was drawn after tid2013/I03 left the clean sources (DISTORTED_REFERENCES) and
# scored once, for the shipped setting. The fourth (seeds 400/4) was drawn after the package photographs
# (PACKAGE_PHOTOGRAPHS) joined the sources, and scored once, for the shipped setting; the first three were
# rescored then, with them.
HELDOUT_SEED, SOURCE_SEED = 100, 1
# results key (the card's HELDOUT_DRAWS, in order) -> (chain seed, drawn-source seed)
DRAWS = dict(zip([k for k in HELDOUT_DRAWS if k not in PHOTOGRAPH_DRAWS + RENDER_DRAWS], [(HELDOUT_SEED, SOURCE_SEED), (200, 2), (300, 3), (400, 4)],
                 strict=True))
# (d), part `fresh`: photographs no fit and no earlier draw saw (found after the fourth draw; the MATE ones
# were scored once in scratch with the shipped setting, then the draw was scored once, nothing changed), from
# the wallpaper packages of Debian 12: (package, path under /usr/share). Finished photographs (macro shots with
# shallow depth of field, landscapes), unlike PACKAGE_PHOTOGRAPHS' snapshots; the Plasma wallpapers that are
# drawings or renders are not among them.
FRESH_DRAW = (500, 5)  # results key: FRESH_KEY
FRESH_PACKAGES = ("mate-backgrounds", "plasma-workspace-wallpapers")
# part `sixth`: photographs found after the evenness refit (docs/edit-damage.md) was fixed, picked by eye (the
# drawings and renders of the packages left out: Fossa, Infinite-Sea, Painting-Colors, umang, analogpattern),
# scored once; nothing was chosen on them
SIXTH_DRAW = (600, 6)  # results key: SIXTH_KEY
SIXTH_PACKAGES = ("lomiri-wallpapers-16.04", "lomiri-wallpapers-20.04")
# part `seventh`: the renders made outside this repository (DISTRIBUTION_RENDERS, the thirteenth signature draw's)
# under damage model B, beside drawn sources of its own seed: smooth gradients no one here made, on which the score
# told the source must stay monotone (issue 42); made with version 11 unchanged, scored once
SEVENTH_DRAW = (1700, 17)  # results key: SEVENTH_KEY
DISTRIBUTION_ROOT = Path("/usr/share")
DISTRIBUTION_PHOTOGRAPHS = {
    **{n: ("mate-backgrounds", f"backgrounds/mate/nature/{n}.jpg")
       for n in ("Aqua", "Blinds", "Dune", "FreshFlower", "Garden", "GreenMeadow", "LadyBird", "RainDrops", "Storm",
                 "TwoWings", "Wood", "YellowFlower")},
    **{n: ("plasma-workspace-wallpapers", f"wallpapers/{n}/contents/images/2560x1600.jpg")
       for n in ("BytheWater", "ColdRipple", "ColorfulCups", "DarkestHour", "EveningGlow", "FallenLeaf", "Grey",
                 "Kite", "OneStandsOut", "Path", "summer_1am")},
    **{n.split("_by_")[0]: ("lomiri-wallpapers-16.04", f"backgrounds/{n}.jpg")
       for n in ("Bridge_by_Sander_Klootwijk", "Dragonfly_by_Bolly", "Picture_0B_by_freespace",
                 "Picture_1A_by_freespace", "Wine_by_Jakkub_Mede", "aitzgorri_by_Aitzol_Berasategi",
                 "free_by_Peter_Nerlich", "friends_by_Aitzol_Berasategi", "greentock_by_Peter_Nerlich",
                 "life_by_Aitzol_Berasategi", "picosdeeuropa_by_Aitzol_Berasategi",
                 "seeding_by_Clements_Engelhardt", "sunset_by_Aitzol_Berasategi")},
    "Kleiber": ("lomiri-wallpapers-20.04", "backgrounds/Kleiber_by_Lukas_Baubkus.jpg"),
}


def heldout_sources(side: int, source_seed: int = SOURCE_SEED) -> dict[str, dict[str, np.ndarray]]:
    """Sources by group: drawn like the paper's, the reference photographs (when present), skimage's."""
    from banana100.synth import GENERATED_SOURCES, generated_source

    photos = photographs()  # one decoding of every photograph; its "ref:" and "pkg:" ones are held out here
    groups = {"generated": {n: generated_source(n, side, seed=source_seed) for n in GENERATED_SOURCES}}
    if REFERENCE_IMAGES.is_dir():
        groups["reference-images"] = {k[4:]: v for k, v in photos.items() if k.startswith("ref:")}
    groups["skimage"] = {n: photos[n] for n in ("chelsea", "hubble_deep_field", "coins")}
    # last, so that the chains before them keep their seeds (a chain's seed is its draw's plus its index)
    groups["package photographs"] = {k[4:]: v for k, v in photos.items() if k.startswith("pkg:")}
    return groups


# renders made outside this repository (a signature draw's `outside` packages, group OUTSIDE_RENDERS): every raster
# wallpaper of Debian's UKUI desktop (3D and gradient renders, two flat graphics) and the dark one of each of GNOME's
# light/dark pairs (renders and patterns; vnc is 256 px: a tiny image), none seen by a fit, a draw or a choice
DISTRIBUTION_RENDERS = {
    **{n: ("ukui-wallpapers", f"backgrounds/{n}.{ext}")
       for n, ext in (("2004default", "jpg"), ("calla", "png"), ("city", "png"), ("desert", "png"),
                      ("firstgeneration", "jpg"), ("fluent-color", "png"), ("focal-ubuntukylin", "png"),
                      ("goldfish", "png"), ("rhythm", "jpg"), ("rollpaper", "png"), ("string", "jpg"),
                      ("the-mouse", "jpg"))},
    **{n: ("gnome-backgrounds", f"backgrounds/gnome/{n}.webp")
       for n in ("adwaita-d", "grid-d", "licorice-d", "pixels-d", "symbolic-d", "truchet-d", "vnc-d", "wood-d")},
}


RENDER_PACKAGES = tuple(dict.fromkeys(pkg for pkg, _ in DISTRIBUTION_RENDERS.values()))
SEVENTH_PACKAGES = RENDER_PACKAGES  # part `seventh`'s sources beside its drawn ones
# the photographs of (e)'s signature draws (a quarter of them each signature's)
SIGNATURE_PACKAGES = ("plasma-workspace-wallpapers", "lomiri-wallpapers-16.04", "lomiri-wallpapers-20.04")
# part `eighth`: damage model B (a lattice among its damage) on the photographs whose own periodic part version 12's
# told-the-source lattice tolerance concerns: all of the signature draws'
EIGHTH_DRAW = (1800, 18)  # results key: EIGHTH_KEY
EIGHTH_PACKAGES = SIGNATURE_PACKAGES


def _distribution_files() -> dict[str, tuple[str, str]]:
    return {**DISTRIBUTION_PHOTOGRAPHS, **DISTRIBUTION_RENDERS}


def missing_distribution_packages(*packages: str) -> list[str]:
    """The packages (only those named, if any) of which some DISTRIBUTION_PHOTOGRAPHS or DISTRIBUTION_RENDERS file
    is absent, sorted; [] when all are installed. Reads DISTRIBUTION_ROOT now (tests point it elsewhere)."""
    return sorted({pkg for pkg, path in _distribution_files().values()
                   if (not packages or pkg in packages) and not (DISTRIBUTION_ROOT / path).is_file()})


def distribution_photograph(name: str) -> np.ndarray:
    """One of DISTRIBUTION_PHOTOGRAPHS (or DISTRIBUTION_RENDERS) as an RGB array (at most MAX_SIDE px)."""
    with Image.open(DISTRIBUTION_ROOT / _distribution_files()[name][1]) as im:
        return as_rgb(np.asarray(im.convert("RGB")))


def distribution_photographs(*packages: str) -> dict[str, dict[str, np.ndarray]]:
    """DISTRIBUTION_PHOTOGRAPHS and DISTRIBUTION_RENDERS (only those of the packages named, if any) as RGB arrays
    (at most MAX_SIDE px), by package; those not installed are left out, and said."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, (package, path) in _distribution_files().items():
        if packages and package not in packages:
            continue
        f = DISTRIBUTION_ROOT / path
        if not f.is_file():
            print(f"{f} is absent (apt-get install {package}): image {name!r} is left out", flush=True)
            continue
        out.setdefault(package, {})[name] = distribution_photograph(name)
    return out


def fresh_sources(side: int, source_seed: int = FRESH_DRAW[1], packages=FRESH_PACKAGES) -> dict[str, dict[str, np.ndarray]]:
    """The sources of part `fresh` (the fifth draw; with other `packages`, of every part of PHOTOGRAPH_PARTS) by
    group: drawn ones of their own seed, then the distribution photographs of `packages`, by package."""
    from banana100.synth import GENERATED_SOURCES, generated_source

    return {"generated": {n: generated_source(n, side, seed=source_seed) for n in GENERATED_SOURCES},
            **distribution_photographs(*packages)}


# the parts of (d) on distribution images: part -> (results key, seeds, packages, sources: (side, seed) -> the drawn
# sources of that seed and the images of its packages)
PHOTOGRAPH_PARTS = {part: (key, draw, packages, functools.partial(fresh_sources, packages=packages))
                    for part, (key, draw, packages) in {"fresh": (FRESH_KEY, FRESH_DRAW, FRESH_PACKAGES),
                                                        "sixth": (SIXTH_KEY, SIXTH_DRAW, SIXTH_PACKAGES),
                                                        "seventh": (SEVENTH_KEY, SEVENTH_DRAW, SEVENTH_PACKAGES),
                                                        "eighth": (EIGHTH_KEY, EIGHTH_DRAW, EIGHTH_PACKAGES)}.items()}


def heldout_chains(steps: int, side: int, chain_seed: int = HELDOUT_SEED, source_seed: int = SOURCE_SEED,
                   model=None, sources=heldout_sources, chain=None) -> tuple[dict[str, dict[int, dict]], dict[str, str]]:
    """The held-out chains of one draw, measured: ({chain: {step: component statistics}}, {chain: its source
    group}). A chain's seed is the draw's plus its index (the order of `sources(side, source_seed)`); `chain`
    (source, seed, steps) -> {step: image} makes it (default: damage model B)."""
    from bench.detector import damage_model_b

    model = model or rel.StatsModel("cpu")
    chain = chain or (lambda a, seed, steps: damage_model_b.chain(a, seed=seed, steps=steps))
    chains, group_of = {}, {}
    for g, images_of_group in sources(side, source_seed).items():
        for name, a in images_of_group.items():
            images = chain(a, chain_seed + len(chains), steps)
            chains[name] = dict(zip(images, model(list(images.values())), strict=True))
            group_of[name] = g
    return chains, group_of


# (e) the other editors' signatures (bench/detector/signatures.py), held out: a part per draw (`signatures`,
# `signatures2`, ...), each a row of evidence.SIGNATURE_DRAWS (its seeds, how it was made). A draw's sources are
# fixed before it is scored, and it is scored once, after the detector's choices are fixed (docs/edit-damage.md);
# development looks at the fit's sources and the development chains (bench/detector/dev_chains.py) only
SIGNATURE_PARTS = {d.part: (d.key, (d.chain_seed, d.source_seed)) for d in SIGNATURE_DRAWS}
SIGNATURE_SKIMAGE = ("chelsea", "hubble_deep_field", "coins")  # held out of the fit


def signature_sources(signature: str, side: int, source_seed: int = SIGNATURE_DRAWS[0].source_seed,
                      outside: tuple[str, ...] = ()) -> dict[str, dict[str, np.ndarray]]:
    """A signature's held-out sources: the drawn sources of `source_seed` and two soft-blob renders (the look of
    generated images), then skimage's held-out photographs and a quarter of the wallpaper photographs (every
    fourth, from the signature's index: each signature its own), then every render of the `outside` packages
    (DISTRIBUTION_RENDERS; last, so that the other chains keep their seeds)."""
    from banana100.synth import GENERATED_SOURCES, generated_source
    from bench.detector.signatures import SIGNATURES

    j = SIGNATURES.index(signature)
    renders = {n: generated_source(n, side, seed=source_seed) for n in GENERATED_SOURCES}
    renders.update({f"soft blobs {10 * source_seed + i}": _smooth_synthetic(10 * source_seed + i, side) for i in range(2)})
    names = sorted(n for n, (pkg, _) in DISTRIBUTION_PHOTOGRAPHS.items() if pkg in SIGNATURE_PACKAGES)
    photos = {n: as_rgb(getattr(skimage.data, n)()) for n in SIGNATURE_SKIMAGE}
    photos.update({n: distribution_photograph(n) for n in names[j::4]})
    groups = {RENDERS: renders, PHOTOGRAPHS: photos}
    if outside:  # each signature's chains start from copies of the same decoded renders
        groups[OUTSIDE_RENDERS] = {n: a.copy() for n, a in _decoded_renders(DISTRIBUTION_ROOT, tuple(outside)).items()}
    return groups


@functools.lru_cache(maxsize=None)
def _decoded_renders(root: Path, packages: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The renders of `packages` (DISTRIBUTION_RENDERS' order), decoded once a process: a draw's four signatures
    read the same 20 (about 5 s of decoding each time). `root`: the DISTRIBUTION_ROOT they are read from (the
    cache's key: set another, and they are read again; another MAX_SIDE empties it)."""
    return {n: a for by_package in distribution_photographs(*packages).values() for n, a in by_package.items()}


def signature_chains(sig: str, steps: int, side: int, chain_seed: int, source_seed: int, outside: tuple[str, ...] = (),
                     model=None, chain=None, scale: float = 1.0) -> tuple[dict[str, dict[int, dict]], dict[str, str]]:
    """One signature's chains of a draw, measured by `model` (heldout_chains'): its held-out sources
    (signature_sources), a chain's seed the draw's plus 100 x the signature's index plus the chain's; `chain` (source,
    seed, steps) -> {step: image} makes one (default: the signature's damage model `scale` times coarser)."""
    from bench.detector import signatures as sg

    chain = chain or (lambda a, seed, n: sg.chain(a, sig, seed=seed, steps=n, scale=scale))
    return heldout_chains(steps, side, chain_seed + 100 * sg.SIGNATURES.index(sig), source_seed, model=model,
                          sources=lambda side_, seed_: signature_sources(sig, side_, seed_, outside), chain=chain)


def part_signatures(steps: int, side: int, chain_seed: int = SIGNATURE_DRAWS[0].chain_seed,
                    source_seed: int = SIGNATURE_DRAWS[0].source_seed, scale: float = 1.0, signatures=None,
                    outside: tuple[str, ...] = ()) -> dict:
    """(e): chains of each signature's damage model from its held-out sources (signature_sources, with the renders
    of the `outside` packages), by signature and source group, and every signature's chains pooled; the damage
    `scale` times coarser (bench/detector/signatures.py), of `signatures` (default: all; a chain's seed stays its
    signature's)."""
    from bench.detector import signatures as sg

    model = rel.StatsModel("cpu")
    out, pooled, pooled_groups = {"seeds": {"chains": chain_seed, "drawn_sources": source_seed}, "steps": steps,
                                  "side": side, "editors": sg.EDITORS, "model": sg.__doc__.strip().splitlines()[0]}, {}, {}
    if scale != 1.0:
        out["damage_scale"] = scale
    for j, sig in enumerate(sg.SIGNATURES):
        if signatures is not None and sig not in signatures:
            continue
        growth = []  # each chain's own damage (sg.damage_growth), in the order the chains are made

        def make(a, seed, n, sig=sig, growth=growth):
            images = sg.chain(a, sig, seed=seed, steps=n, scale=scale)
            growth.append(sg.damage_growth(images, sig, seed, n))
            return images

        chains, group_of = signature_chains(sig, steps, side, chain_seed, source_seed, outside, model=model, chain=make)
        grown = dict(zip(chains, growth, strict=True))
        flat = [c for c, g in grown.items() if not sg.damage_grows(g)]  # detector-free: the premise fails
        out[sig] = {"all": _chain_figures(chains),
                    "params": {c: sg.chain_params(sig, chain_seed + 100 * j + i, scale) for i, c in enumerate(chains)},
                    "damage_rms": {c: {str(k): round(v, 3) for k, v in g.items()} for c, g in grown.items()},
                    "no_damage_growth": flat}
        for g in dict.fromkeys(group_of.values()):
            out[sig][g] = _chain_figures({c: st for c, st in chains.items() if group_of[c] == g})
        pooled.update({f"{sig}/{c}": st for c, st in chains.items()})
        pooled_groups.update({f"{sig}/{c}": g for c, g in group_of.items()})
        a = out[sig]["all"]
        print(f"(e) {sig}, {len(chains)} chains: relative fails {a['relative']['n_failed']}, AUC step 1 vs 10 "
              f"{a['relative']['auc_step1_vs_step10']:.3f}; bare fails {a['bare']['n_failed']}, clean vs step 10 "
              f"{a['bare']['auc_clean_vs_step10']:.3f}", flush=True)
    out["pooled"] = {"all": _chain_figures(pooled)}
    for g in dict.fromkeys(pooled_groups.values()):
        out["pooled"][g] = _chain_figures({c: st for c, st in pooled.items() if pooled_groups[c] == g})
    return out


# the paper's hand-crafted metrics: PIQE needs no file, NIQE, BRISQUE and IL-NIQE the parameter files ../shared holds
OTHER_METRICS = ("piqe", "niqe", "brisque", "ilniqe")


def _scored_by(scorers: list[MetricScorer]):
    """heldout_chains' `model` for other metrics: a list of images -> [{metric: score}] in order, None where the
    metric defines no score (NIQE on a nearly uniform image); any other error is raised."""
    import warnings

    from banana100.errors import ScoreUndefinedError
    from banana100.metrics.native import FlatRegionWarning

    def measure(images: list[np.ndarray]) -> list[dict[str, float | None]]:
        names = [f"image {i}" for i in range(len(images))]
        per = {}
        with warnings.catch_warnings():  # a flat render's warning a step: their cards say what it means
            warnings.simplefilter("ignore", FlatRegionWarning)
            for s in scorers:
                scored = s.measure(images, names)
                if other := [e for e in scored.errors.values() if not isinstance(e, ScoreUndefinedError)]:
                    raise other[0]
                per[s.name] = scored.scores
        return [{m: v[i] for m, v in per.items()} for i in range(len(images))]

    return measure


def _scorers_of(metrics) -> tuple:
    """(heldout_chains' `model` scoring by `metrics`, {metric: lower_better}). Every scorer is built here, first,
    so a missing parameter file stops a part before any chain is made."""
    from banana100.metrics.table import get_metric

    scorers = [MetricScorer(m, device="cpu", batch_size=8) for m in metrics]
    return _scored_by(scorers), {s.name: get_metric(s.name).lower_better for s in scorers}


def _figures_by_metric(chains: dict[str, dict[int, dict]], lower: dict[str, bool]) -> dict[str, dict]:
    """{metric: metric_figures} of chains measured by _scorers_of's model."""
    return {m: metric_figures({c: {k: st[k][m] for k in st} for c, st in chains.items()}, lower_better)
            for m, lower_better in lower.items()}


def part_other_metrics(steps: int, side: int, key: str, metrics=OTHER_METRICS) -> dict:
    """The held-out signature draw `key`'s chains (made again, as part_signatures makes them) scored by `metrics`:
    per signature and pooled, each metric's protocol and AUCs (metric_figures), read in its own worse direction, for
    the card to set edit_damage's beside them."""
    from bench.detector import signatures as sg

    draw = signature_draw_of(key)
    model, lower = _scorers_of(metrics)
    out, pooled = {"draw": key, "metrics": list(lower), "steps": steps, "side": side}, {}
    for sig in sg.SIGNATURES:
        chains, _ = signature_chains(sig, steps, side, draw.chain_seed, draw.source_seed, draw.outside, model=model)
        out[sig] = _figures_by_metric(chains, lower)
        pooled.update({f"{sig}/{c}": st for c, st in chains.items()})
        print(f"(e) by other metrics, {sig}, {len(chains)} chains, AUC clean vs step 10: " + ", ".join(
            f"{m} {f['auc_clean_vs_step10']:.3f}" for m, f in out[sig].items()), flush=True)
    out["pooled"] = _figures_by_metric(pooled, lower)
    return out


def part_other_metrics_model_b(steps: int, side: int, key: str, metrics=OTHER_METRICS) -> dict:
    """Damage model B's held-out draw `key` (one of PHOTOGRAPH_PARTS': made again, as part_heldout makes it) scored by
    `metrics`, its chains together: {"draw", "metrics", "all": {metric: metric_figures}}."""
    seeds, sources = next((seeds, sources) for k, seeds, _, sources in PHOTOGRAPH_PARTS.values() if k == key)
    model, lower = _scorers_of(metrics)
    chains, _ = heldout_chains(steps, side, *seeds, model=model, sources=sources)
    out = {"draw": key, "metrics": list(lower), "steps": steps, "side": side, "all": _figures_by_metric(chains, lower)}
    print(f"(d) by other metrics, {key}, {len(chains)} chains, AUC clean vs step 10: " + ", ".join(
        f"{m} {f['auc_clean_vs_step10']:.3f}" for m, f in out["all"].items()), flush=True)
    return out


def part_heldout(steps: int, side: int, chain_seed: int = HELDOUT_SEED, source_seed: int = SOURCE_SEED,
                 sources=heldout_sources, together: str = PHOTOGRAPHS) -> dict:
    """(d); its fifth draw with sources=fresh_sources: chains of a second damage model (bench/detector/damage_model_b.py)
    from sources by group, and every group but the drawn sources together under `together` (the photographs;
    OUTSIDE_RENDERS for the draw on renders)."""
    from bench.detector import damage_model_b

    chains, group_of = heldout_chains(steps, side, chain_seed, source_seed, sources=sources)
    out = {"all": _chain_figures(chains), "model": damage_model_b.__doc__.strip().splitlines()[0],
           "params": {c: damage_model_b.chain_params(chain_seed + i) for i, c in enumerate(chains)},
           "seeds": {"chains": chain_seed, "drawn_sources": source_seed}, "steps": steps, "side": side}
    for g in dict.fromkeys(group_of.values()):
        sub = {c: s for c, s in chains.items() if group_of[c] == g}
        if len(sub) >= 2:
            out[g] = _chain_figures(sub)
    # every photograph together, against the drawn sources (the release's kind of source): where alone it is weakest
    photos = {c: s for c, s in chains.items() if group_of[c] != "generated"}
    if len(photos) >= 2 and len(photos) < len(chains):
        out[together] = _chain_figures(photos)
    a = out["all"]
    print(f"(d) damage model B, seeds {chain_seed}/{source_seed}, {len(chains)} chains: relative fails {a['relative']['n_failed']}, AUC step 1 vs 10 "
          f"{a['relative']['auc_step1_vs_step10']:.3f}; bare fails {a['bare']['n_failed']}, AUC step 1 vs 10 "
          f"{a['bare']['auc_step1_vs_step10']:.3f}, clean vs step 10 {a['bare']['auc_clean_vs_step10']:.3f}", flush=True)
    return out


def part_protocol(steps: int, side: int) -> dict:
    """(c) simulated-editor chains, every setting: the protocol of the bare and the relative score."""
    from banana100.chains.editors import make_editor
    from banana100.chains.runner import generate_chains
    from banana100.chains.manifest import image_path, read_manifest
    from banana100.chains.settings import load_settings
    from banana100.imageio import load_rgb

    model = rel.StatsModel("cpu")
    keep = (0, 1, 5, 10, 20)
    out, pooled = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "sources"
        src.mkdir()
        for n in ("astronaut", "coffee", "rocket"):
            a = skimage.data.__getattribute__(n)()
            h, w = a.shape[:2]
            s = side / min(h, w)
            Image.fromarray(a).resize((round(w * s), round(h * s)), Image.LANCZOS).save(src / f"{n}.png")
        for setting in load_settings():
            run = Path(tmp) / setting
            generate_chains(make_editor("simulated"), sources=src, setting=setting, steps=steps, repeats=1,
                            out_dir=run, progress=False)
            recs = [r for r in read_manifest(run) if r["step"] in keep]
            stats = model([load_rgb(image_path(run, r)) for r in recs])
            chains: dict[str, dict] = {}
            for r, st in zip(recs, stats, strict=True):
                chains.setdefault(r["chain_id"], {})[r["step"]] = st
            fig = _chain_figures(chains, check_steps=tuple(k for k in (5, 10, 20) if k <= steps))
            out[setting] = {k: {f: v[f] for f in ("n_chains", "n_failed", "mean_rho")} for k, v in fig.items()}
            pooled.update(chains)
            print(f"(c) {setting}: bare fails {fig['bare']['n_failed']} of {fig['bare']['n_chains']}, relative "
                  f"fails {fig['relative']['n_failed']}", flush=True)
    out["all settings"] = _chain_figures(pooled)
    a = out["all settings"]
    print(f"(c) all settings, {len(pooled)} chains: relative AUC step 1 vs 10 {a['relative']['auc_step1_vs_step10']:.3f}; "
          f"bare {a['bare']['auc_step1_vs_step10']:.3f}, clean vs step 10 {a['bare']['auc_clean_vs_step10']:.3f}",
          flush=True)
    return out


DEFAULT_OUT = REPO / "banana100/metrics/detector/data/edit_damage_validation.json"  # the figures of record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--part", default=",".join(["ladders", "clean", "protocol", "heldout", *PHOTOGRAPH_PARTS,
                                                *SIGNATURE_PARTS]))
    ap.add_argument("--chain-steps", type=int, default=20)
    ap.add_argument("--chain-side", type=int, default=256)
    ap.add_argument("--heldout-side", type=int, default=384, help="width of the drawn sources in (d) and (e)")
    ap.add_argument("--damage-scale", type=float, default=1.0,
                    help="(e)'s damage this many times coarser (bench/detector/signatures.py); needs another --out")
    ap.add_argument("--signatures", default=None, help="(e)'s signatures, comma-separated (default: all)")
    ap.add_argument("--other-metrics", default=",".join(OTHER_METRICS),
                    help="part other_metrics' metrics (default: %(default)s; NIQE, BRISQUE and IL-NIQE need their "
                         "parameter files: BANANA100_WEIGHTS=../shared/iqa-params)")
    ap.add_argument("--max-side", type=int, default=RECORD_MAX_SIDE,
                    help=f"photographs and renders read from files shrunk to at most this many px (default {RECORD_MAX_SIDE}; "
                         "with --heldout-side, every source of a draw at another size); needs another --out")
    args = ap.parse_args(argv)
    if ((args.damage_scale != 1.0 or args.signatures or args.max_side != RECORD_MAX_SIDE)
            and Path(args.out).resolve() == DEFAULT_OUT.resolve()):
        # a draw at another scale or size, or of some signatures only, is no figure of record: it must not replace one
        ap.error("--damage-scale, --max-side and --signatures write a draw of their own: give --out another file")
    if args.max_side < 64:
        ap.error(f"--max-side {args.max_side}: the detector measures images of at least 64 px")
    _set_max_side(args.max_side)
    scorer = MetricScorer("edit_damage", device="cpu", batch_size=8)
    out_path = Path(args.out)
    result = json.loads(out_path.read_text()) if out_path.is_file() else {}
    result["environment"] = {"python": sys.version.split()[0], "platform": platform.platform(),
                             "reference_images": REFERENCE_IMAGES.is_dir(),
                             "command": "python -m bench.detector.validate_edit_damage " + " ".join(argv or sys.argv[1:])}
    t0 = time.perf_counter()
    parts = args.part.split(",")
    # the parts may come from separate runs: the command that wrote each
    result.setdefault("commands", {}).update({p: result["environment"]["command"] for p in parts})
    if "ladders" in parts:
        result["ladders"] = part_ladders(scorer)
    if "clean" in parts:
        result["clean_vs_step5"] = part_clean(scorer)
    if "heldout" in parts:
        for key, seeds in DRAWS.items():
            result[key] = part_heldout(args.chain_steps, args.heldout_side, *seeds)
    for part, (key, seeds, packages, sources) in PHOTOGRAPH_PARTS.items():
        if part not in parts:
            continue
        if missing := missing_distribution_packages(*packages):
            print(f"part {part} skipped: images of {', '.join(missing)} are not installed (apt-get install "
                  f"{' '.join(missing)}); {key} in the results is kept as it was", flush=True)
        else:
            result[key] = part_heldout(args.chain_steps, args.heldout_side, *seeds, sources=sources,
                                       together=OUTSIDE_RENDERS if key in RENDER_DRAWS else PHOTOGRAPHS)
    for part, (key, seeds) in SIGNATURE_PARTS.items():
        if part not in parts:
            continue
        outside = signature_draw_of(key).outside
        if missing := missing_distribution_packages(*SIGNATURE_PACKAGES, *outside):
            print(f"part {part} skipped: apt-get install {' '.join(missing)}; {key} is kept as it was", flush=True)
        else:
            result[key] = part_signatures(args.chain_steps, args.heldout_side, *seeds, scale=args.damage_scale,
                                          signatures=args.signatures.split(",") if args.signatures else None,
                                          outside=outside)
    # not default parts: they need the metrics' parameter files
    if "other_metrics" in parts:
        draw = signature_draw(max(SIGNATURE_HELD_OUT))
        if missing := missing_distribution_packages(*SIGNATURE_PACKAGES, *draw.outside):
            print(f"part other_metrics skipped: apt-get install {' '.join(missing)}", flush=True)
        else:
            result[OTHER_METRICS_KEY] = part_other_metrics(args.chain_steps, args.heldout_side, draw.key,
                                                           args.other_metrics.split(","))
    if "other_metrics_model_b" in parts:
        if missing := missing_distribution_packages(*EIGHTH_PACKAGES):
            print(f"part other_metrics_model_b skipped: apt-get install {' '.join(missing)}", flush=True)
        else:
            result[OTHER_METRICS_MODEL_B_KEY] = part_other_metrics_model_b(
                args.chain_steps, args.heldout_side, EIGHTH_KEY, args.other_metrics.split(","))
    if "protocol" in parts:
        result["simulated_protocol"] = part_protocol(args.chain_steps, args.chain_side)
        result["simulated_protocol_args"] = {"steps": args.chain_steps, "side": args.chain_side,
                                             "sources": ["astronaut", "coffee", "rocket"]}
    write_results(out_path, result)
    print(f"wrote {out_path} in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
