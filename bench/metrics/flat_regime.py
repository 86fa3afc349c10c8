"""How far the hand-crafted scores can be trusted on images with flat areas (issue 12).

    python -m bench.metrics.flat_regime [--metrics brisque,niqe,ilniqe] [--out banana100/metrics/native/flat_regime.json]

In a flat window (or on an exact ramp) an MSCN coefficient is a rounding leftover: its sign is
the arithmetic's, not the image's, and the AGGD fits count signs. So on such images a score is
only defined together with an arithmetic:

- mode "official": the MATLAB releases filter with `filter2` (BRISQUE: an SVD-split separable
  pass whose factors carry LAPACK's last bits) or `imfilter` (NIQE, IL-NIQE: separable or not
  depending on the MATLAB version's threshold). Their leftovers cannot be reproduced without
  MATLAB. This script bounds what they can do to the score: every leftover coefficient (those
  `repair.leftover_bound` flags) is set to 0, to +1e-12 or to -1e-12 (all one sign), besides the
  native value, and the spread of the four scores, |max - min| / max(|score|, 1), is reported
  against the image's leftover share (`last_flat_share` of the native module);
- mode "pyiqa": pyiqa's own score moves with its convolution backend (oneDNN on and off).

Images: a photo (skimage coffee) with a flat patch of growing area at grey levels 48, 153 and
255, skimage's synthetic images, clipped photos. Prints a table and writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, REPO, write_results
FILES = {
    "brisque": ("brisque_live_allmodel", "brisque_live_allrange"),
    "niqe": ("niqe_modelparameters.mat",),
    "ilniqe": ("ILNIQE_templateModel.mat",),
}
PYIQA_FILE = {"brisque": "brisque_svm_weights.pth", "niqe": "niqe_modelparameters.mat",
              "ilniqe": "ILNIQE_templateModel.mat"}


def images(quick: bool) -> list[tuple[str, np.ndarray]]:
    import skimage.data as sd
    from banana100.testing.flat_images import grey3, stretched_clipped

    coffee = grey3(sd.coffee())
    out = [("coffee", coffee)]
    fractions = (0.05, 0.2, 0.5) if quick else (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7)
    for level in (48, 153, 255):
        for frac in fractions:
            img = coffee.copy()
            h = round(coffee.shape[0] * frac)
            img[:h] = level  # a clipped "sky": the top rows
            out.append((f"coffee, top {frac:.0%} at {level}", img))
    for n in ("horse", "checkerboard"):
        out.append((n, grey3(getattr(sd, n)())))
    out.append(("binary_blobs", grey3(sd.binary_blobs(length=256, rng=1))))
    out += [(f"{n} stretched x2, clipped", stretched_clipped(n)) for n in ("camera", "coffee", "rocket")]
    return out


class LeftoverPolicy:
    """Overrides the MSCN leftovers of the native official modules while active."""

    def __init__(self, value: float | None):
        self.value = value

    def __enter__(self):
        from banana100.metrics.native import ilniqe, matlab, nss, repair

        self.saved = (nss.mscn, ilniqe.ILNIQE._mscn)
        if self.value is None:
            return self
        value = self.value
        orig_mscn, orig_il = self.saved

        def mscn(x, window, padding, **kw):
            out = orig_mscn(x, window, padding, **kw)
            mu = matlab.imfilter(x, window, padding)
            out[(x - mu).abs() <= repair.leftover_bound(window, torch.float64)] = value
            return out

        def il_mscn(module, t):
            out = orig_il(module, t)
            window = torch.tensor(module.mscn_window, dtype=torch.float64)
            mu = ilniqe.filter2d(t, module.mscn_window)
            out[(t - mu).abs() <= repair.leftover_bound(window, torch.float64)] = value
            return out

        nss.mscn = mscn
        ilniqe.ILNIQE._mscn = il_mscn
        return self

    def __exit__(self, *exc):
        from banana100.metrics.native import ilniqe, nss

        nss.mscn, ilniqe.ILNIQE._mscn = self.saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", default="brisque,niqe,ilniqe")
    ap.add_argument("--params", type=Path, default=PARAMS)
    ap.add_argument("--quick", action="store_true", help="fewer patch sizes (IL-NIQE is slow in pyiqa)")
    ap.add_argument("--only", default="", help="image names to keep, separated by | (IL-NIQE: pyiqa is slow)")
    ap.add_argument("--out", type=Path, default=REPO / "banana100" / "metrics" / "native" / "flat_regime.json")
    args = ap.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    import pyiqa

    from banana100.metrics import native
    from banana100.metrics.engine.scorer import to_tensor

    t0 = time.time()
    results = {"command": "python -m bench.metrics.flat_regime " + " ".join(sys.argv[1:]), "metrics": {}}
    for metric in args.metrics.split(","):
        files = {f: args.params / f for f in FILES[metric]}
        if not all(p.is_file() for p in files.values()):
            results["metrics"][metric] = {"skipped": f"missing files in {args.params}"}
            continue
        official = native.build(metric, files, "official")
        ours = native.build(metric, files, "pyiqa")
        theirs = pyiqa.create_metric(metric, pretrained_model_path=str(args.params / PYIQA_FILE[metric]),
                                     device="cpu")
        rows = []
        subset = images(args.quick or metric == "ilniqe")
        if args.only:
            subset = [(n, rgb) for n, rgb in subset if n in args.only.split("|")]
        for name, rgb in subset:
            x = to_tensor(rgb)[None]
            with torch.no_grad():
                native_pyiqa = float(ours(x)[0])
                share = float(ours.last_flat_share[0])
                variants = {}
                for label, value in (("native", None), ("zero", 0.0), ("plus", 1e-12), ("minus", -1e-12)):
                    with LeftoverPolicy(value):
                        variants[label] = float(official(x)[0])
                py_on = float(theirs(x).reshape(-1)[0])
                with torch.backends.mkldnn.flags(enabled=False):
                    py_off = float(theirs(x).reshape(-1)[0])
            scores = list(variants.values())
            spread = (max(scores) - min(scores)) / max(abs(variants["native"]), 1.0)
            rows.append({"image": name, "leftover_share": share, "official": variants,
                         "official_spread": spread, "pyiqa_onednn": py_on, "pyiqa_no_onednn": py_off,
                         "pyiqa_backend_spread": abs(py_on - py_off) / max(abs(py_on), 1.0),
                         "native_pyiqa": native_pyiqa,
                         "native_vs_pyiqa": abs(native_pyiqa - py_on) / max(abs(py_on), 1.0)})
            print(f"{metric:8s} {name:34s} leftovers {share:6.1%}  official spread {spread:8.2%}  "
                  f"pyiqa oneDNN on/off {rows[-1]['pyiqa_backend_spread']:8.2%}  native-pyiqa "
                  f"{rows[-1]['native_vs_pyiqa']:.1e}", flush=True)
        results["metrics"][metric] = {"rows": rows}
    results["seconds"] = round(time.time() - t0)
    for m in results["metrics"].values():
        m["command"], m["seconds"] = results["command"], results["seconds"]
    # metrics not run this time keep their earlier results (the cards read one file)
    earlier = json.loads(args.out.read_text()).get("metrics", {}) if args.out.is_file() else {}
    results["metrics"] = {**earlier, **results["metrics"]}
    write_results(args.out, results)
    print(f"written {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
