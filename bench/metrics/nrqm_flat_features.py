"""NRQM (and so PI) feature stage on flat and saturated images: native vs pyiqa (issue 12).

    python -m bench.metrics.nrqm_flat_features

NRQM's final score needs NRQM_model.mat, which this machine lacks; its three feature groups
(block-DCT GGD fits, GSM features of a steerable pyramid, singular values of 5x5 patches) are
what the native code computes before the forests, so they are compared with pyiqa's own
(`banana100/testing/nrqm_reference.py`) on the flat-patch, synthetic and clipped images of
tests/metrics/native/test_native_flat.py. Prints the largest relative difference per group and image and
writes bench/results/metrics/nrqm_flat.json.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

from pathlib import Path
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, write_results


def main(argv=None) -> None:
    # no options: a parser all the same, so that --help says what it does instead of running it
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    from banana100.testing.flat_images import flat_images, synthetic_images
    from banana100.testing.nrqm_reference import pyiqa_nrqm_features

    from banana100.metrics.engine.scorer import to_tensor
    from banana100.metrics.native import nrqm

    model = nrqm.NRQM(np.zeros(4), [], mode="pyiqa")
    rows = []
    for name, rgb in flat_images()[:2] + flat_images()[2:3] + synthetic_images():
        x = to_tensor(rgb)[None]
        ours = model.features(model.luminance(x))
        theirs = pyiqa_nrqm_features(x)
        diffs = []
        for a, b in zip(ours, theirs, strict=True):
            a, b = a.double().reshape(-1), b.double().reshape(-1)
            ok = torch.isfinite(a) & torch.isfinite(b)
            same_nan = bool(torch.equal(torch.isnan(a), torch.isnan(b)))
            d = ((a - b).abs() / b.abs().clamp(min=1e-12))[ok]
            diffs.append({"max_rel": float(d.max()) if d.numel() else 0.0, "same_nan": same_nan,
                          "max_abs": float((a - b)[ok].abs().max()) if ok.any() else 0.0,
                          "worst_feature": int(d.argmax()) if d.numel() else -1})
        rows.append({"image": name, "groups": diffs})
        print(f"{name:34s} " + "  ".join(f"f{k + 1} {g['max_rel']:.1e} (abs {g['max_abs']:.0e})"
                                         f"{'' if g['same_nan'] else ' NaN!'}"
                                         for k, g in enumerate(diffs)), flush=True)
    out = RESULTS / "metrics" / "nrqm_flat.json"
    write_results(out, {"command": "python -m bench.metrics.nrqm_flat_features", "rows": rows})
    print(f"written {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
