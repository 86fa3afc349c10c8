"""The bare edit_damage score on hard clean images, and on the development chains, against an older detector.

    python -m bench.detector.hard_images [--baseline COMMIT_OR_FILE] [--chains DIR] [--outside-renders] [--out FILE]

Hard images (built here, no file needed): clean synthetic graphics a quality filter meets, where a component
can read content as damage: rounded gradients (banding), a radial gradient, a typeset page, stripes, bars and
gratings at the crease window's scale, flat shapes. Each is scored by the current detector and by --baseline's
(a commit's or a file's model.py, as bench_edit_damage.py's): the bare score and the terms above 0.05.

--chains DIR (the .npz files of `bench.detector.dev_chains --out DIR`, the fit's sources only): per family, the
chains passing the protocol (steps 5, 10 and 20 above step 1) and the ROC AUC clean vs step 10 across chains, by
both detectors; and the same told the source (edit_damage_rel against step 0: passed, AUC step 1 vs step 10), the
comparison's rules (relative.py) the current ones for both. What a change is looked at on before the held-out draws
are scored once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import command_line, environment, results_path, write_results
from bench.detector.baseline import detector_as_of



def _grey(a: np.ndarray) -> np.ndarray:
    return np.repeat(np.clip(a + 0.5, 0, 255).astype(np.uint8)[..., None], 3, axis=2)


def typeset_page(size=(512, 384)) -> np.ndarray:
    """Twelve lines of PIL's default font on paper: letters' dots and stems, punctuation."""
    from PIL import Image, ImageDraw

    im = Image.new("RGB", size, (250, 250, 245))
    draw = ImageDraw.Draw(im)
    for i in range(12):
        draw.text((20, 20 + 28 * i), "The quick brown fox jumps over the lazy dog 0123456789 i j ; : !", fill=(20, 20, 20))
    return np.asarray(im).copy()


def hard_images() -> dict[str, np.ndarray]:
    from PIL import Image, ImageDraw

    yy, xx = np.indices((384, 512)).astype(np.float64)
    ry, rx = np.indices((400, 400)).astype(np.float64)
    shapes = Image.new("RGB", (512, 384), (30, 90, 160))
    draw = ImageDraw.Draw(shapes)
    draw.ellipse((50, 50, 250, 250), fill=(240, 200, 30))
    draw.rectangle((280, 80, 480, 300), fill=(200, 40, 60))
    noisy = np.where(yy % 4 < 2, 30.0, 230.0) + np.random.default_rng(1).normal(0, 8, yy.shape)
    return {
        "rounded ramp": _grey(xx / 511 * 255),
        "rounded diagonal ramp": _grey((yy + xx) / 894 * 255),
        "radial gradient": _grey(255 - np.hypot(ry - 200, rx - 200) * 1.2),
        "typeset page": typeset_page(),
        "bars of 6 px": _grey(np.where(yy % 6 < 3, 30.0, 230.0)),
        "lines every 4 px": _grey(np.where(yy % 4 == 0, 30.0, 230.0)),
        "grating of 7 px": _grey(130 + 100 * np.sin(2 * np.pi * yy / 7)),
        "noisy bars of 4 px": _grey(noisy),
        "flat shapes": np.asarray(shapes).copy(),
    }


def _scorer(model):
    """(bare score, terms, components) of one HxWx3 uint8 image by `model`'s EditDamage."""
    import torch

    detector = model.EditDamage()
    detector.colour_edges = True  # edit_damage_rel's own component too, where the module has it (version 11 on)

    def score(a: np.ndarray) -> tuple[float, dict[str, float]]:
        x = torch.from_numpy(np.ascontiguousarray(a)).permute(2, 0, 1)[None].float() / 255
        s = float(detector(x)[0])
        components = {k: float(v[0]) for k, v in detector.last_components.items()}
        components["cast"] = tuple(float(v) for v in detector.last_cast[0])  # what edit_damage_rel compares
        return s, model.terms(components), components

    return score


def _passed(runs: list[dict[int, float]]) -> int:
    """How many chains ({step: score}, lower better) pass the paper's protocol (banana100.protocol)."""
    from banana100.protocol import chain_verdict

    return sum(bool(chain_verdict({k: -v for k, v in s.items()})["passed"]) for s in runs)


def _families(chains: Path, score) -> dict[str, dict]:
    from banana100.metrics.detector.relative import relative_score
    from bench.detector.validate_edit_damage import auc

    by_family: dict[str, list[dict[int, float]]] = {}
    told: dict[str, list[dict[int, float]]] = {}  # edit_damage_rel against the chain's step 0
    clean_specks = {}  # a source's own specks a megapixel: its clean step, the same in every family
    for f in sorted(chains.glob("*.npz")):
        z = np.load(f)
        scored = {int(k[1:]): score(z[k]) for k in z.files}
        family = f.stem.split("__")[0]
        by_family.setdefault(family, []).append({k: v[0] for k, v in scored.items()})
        told.setdefault(family, []).append({k: relative_score(v[2], scored[0][2]) for k, v in scored.items()})
        clean_specks[f.stem.split("__")[1]] = round(scored[0][2]["speckles"])
    out = {"clean_speckles": clean_specks}
    for family, runs in by_family.items():
        out[family] = {"chains": len(runs), "passed": _passed(runs),
                       "auc_clean_vs_step10": auc([s[0] for s in runs], [s[10] for s in runs]),
                       "told_passed": _passed(told[family]),
                       "told_auc_step1_vs_step10": auc([s[1] for s in told[family]], [s[10] for s in told[family]])}
    every = [s for runs in by_family.values() for s in runs]
    every_told = [s for runs in told.values() for s in runs]
    out["pooled"] = {"chains": len(every), "passed": _passed(every),
                     "auc_clean_vs_step10": auc([s[0] for s in every], [s[10] for s in every]),
                     "told_passed": _passed(every_told),
                     "told_auc_step1_vs_step10": auc([s[1] for s in every_told], [s[10] for s in every_told])}
    return out


def _outside_renders() -> dict[str, np.ndarray]:
    """The validator's renders made outside this repository (its thirteenth signature draw's), those installed."""
    from bench.detector import validate_edit_damage as validate

    by_package = validate.distribution_photographs(*validate.RENDER_PACKAGES)  # says which are absent
    return {name: a for images in by_package.values() for name, a in images.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="9e6d5cf", help="a commit or a file of an older model.py (default: version 7)")
    ap.add_argument("--chains", help="a folder of development chains (bench.detector.dev_chains --out)")
    ap.add_argument("--outside-renders", action="store_true",
                    help="also the clean renders made outside this repository (the validator's DISTRIBUTION_RENDERS, "
                         "those installed: apt-get install ukui-wallpapers gnome-backgrounds)")
    ap.add_argument("--out", default=str(results_path(__file__)))
    args = ap.parse_args(argv)
    from banana100.metrics.detector import model

    scorers = {"current": _scorer(model), "baseline": _scorer(detector_as_of(args.baseline, "edit_damage_base"))}
    images = hard_images()
    if args.outside_renders:
        images.update({f"outside: {n}": a for n, a in _outside_renders().items()})
    hard = {}
    for name, image in images.items():
        hard[name] = {}
        for who, score in scorers.items():
            s, terms, _ = score(image)
            hard[name][who] = {"score": s, "terms": {k: round(v, 3) for k, v in terms.items() if v > 0.05}}
        print(f"{name:22s} baseline {hard[name]['baseline']['score']:6.2f} -> current {hard[name]['current']['score']:6.2f}"
              f"  {hard[name]['current']['terms']}", flush=True)
    results = {"command": command_line("bench.detector.hard_images", argv or sys.argv[1:], {args.chains: "DIR"}),
               "environment": environment(), "baseline": args.baseline, "hard_images": hard}
    if args.chains:
        fam = {who: _families(Path(args.chains), score) for who, score in scorers.items()}
        results["development_chains"] = fam
        print("clean sources' own specks a megapixel:", {n: f"{fam['baseline']['clean_speckles'][n]} -> {v}"
                                                        for n, v in fam["current"]["clean_speckles"].items()})
        for f in (f for f in fam["current"] if f != "clean_speckles"):
            b, c = fam["baseline"][f], fam["current"][f]
            print(f"{f:14s} passed {b['passed']} -> {c['passed']} of {c['chains']}, AUC clean vs step 10 "
                  f"{b['auc_clean_vs_step10']:.3f} -> {c['auc_clean_vs_step10']:.3f}; told the source: passed "
                  f"{b['told_passed']} -> {c['told_passed']}, AUC step 1 vs 10 {b['told_auc_step1_vs_step10']:.3f} -> "
                  f"{c['told_auc_step1_vs_step10']:.3f}")
    write_results(Path(args.out), results)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
