"""Development chains for the detector's components, on the fit's sources only (never the validation's).

    nice python -m bench.detector.dev_chains --out DIR [--steps 20] [--side 384]

Per signature (bench/detector/signatures.py) and for damage model B (Nano Banana Pro's kind), chains from the
fit's sources (bench/detector/fit_edit_damage.py: banana100.synth's drawn sources of seed 0, two soft-blob
renders of seeds of their own, skimage's in-fit astronaut and coffee, two MATE photographs), with chain seeds
DEV_SEEDS apart from every held-out draw's. Writes each chain's steps 0, 1, 5, 10 and 20 as one .npz: what a
component change is looked at on before the held-out draws are scored once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import skimage.data

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

DEV_SEED = 9000  # chain seeds from here (no held-out draw takes 9000-9419 for a signature: the test of seeds)
DEV_BLOBS = (90, 91)  # soft-blob seeds (the signature draw's are 70, 71)
DEV_PHOTOS = ("astronaut", "coffee", "deb:Aqua", "deb:GreenMeadow")


def dev_sources(side: int) -> dict[str, np.ndarray]:
    from banana100.synth import GENERATED_SOURCES, generated_source
    from bench.detector.fit_edit_damage import FIT_GENERATED_SEED
    from bench.detector.validate_edit_damage import _smooth_synthetic, as_rgb, distribution_photograph

    out = {n: generated_source(n, side, seed=FIT_GENERATED_SEED) for n in GENERATED_SOURCES}
    out.update({f"soft blobs {s}": _smooth_synthetic(s, side) for s in DEV_BLOBS})
    for n in DEV_PHOTOS:
        out[n] = distribution_photograph(n[4:]) if n.startswith("deb:") else as_rgb(getattr(skimage.data, n)())
    return out


def main(argv=None) -> int:
    from bench.detector import damage_model_b
    from bench.detector import signatures as sg

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--side", type=int, default=384)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sources = dev_sources(args.side)
    makers = {sig: (lambda a, seed, sig=sig: sg.chain(a, sig, seed=seed, steps=args.steps)) for sig in sg.SIGNATURES}
    makers["grain_lattice"] = lambda a, seed: damage_model_b.chain(a, seed=seed, steps=args.steps)
    for j, (kind, make) in enumerate(makers.items()):
        for i, (name, a) in enumerate(sources.items()):
            f = out / f"{kind}__{name.replace(':', '_').replace(' ', '_')}.npz"
            if f.is_file():
                continue
            images = make(a, DEV_SEED + 100 * j + i)
            np.savez_compressed(f, **{f"s{k}": v for k, v in images.items()})
            print(f, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
