"""Which bound holds between native BRISQUE and pyiqa's, on photographs with a few per cent of
flat windows (issue 25: the promised 1e-2 of max(|score|, 1) failed on one held-out photograph).

    python -m bench.metrics.brisque_bound

For each of skimage's sample photographs (and the reference images of ../shared present here):
the native score (mode "pyiqa"), pyiqa's float32 score, pyiqa's arch run in float64, the flat
share, and the two relative differences |native - pyiqa| / max(|pyiqa|, 1). A fitted shape is
the nearest point of a 0.001 grid: where pyiqa's float32 ratio and the native float64 one
straddle a step, native agrees with pyiqa in float64 instead. Writes bench/results/metrics/brisque_bound.json.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import sys
from pathlib import Path
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, SHARED, environment, results_path, write_results

SAMPLES = ("astronaut", "chelsea", "coffee", "rocket", "camera", "immunohistochemistry", "hubble_deep_field",
           "coins", "moon", "page", "text", "brick", "grass", "gravel")


def main(argv=None) -> None:
    # no options: a parser all the same, so that --help says what it does instead of running it
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    import pyiqa
    import skimage.data as data

    from banana100.imageio import load_rgb
    from banana100.metrics.engine.scorer import to_tensor
    from banana100.metrics.native import brisque

    torch.set_num_threads(1)
    native = brisque.build({k: PARAMS / k for k in (brisque.MODEL_FILE, brisque.RANGE_FILE)}, "pyiqa")
    theirs = pyiqa.create_metric("brisque", pretrained_model_path=str(PARAMS / "brisque_svm_weights.pth"), device="cpu")
    images = []
    for name in SAMPLES:
        a = np.asarray(getattr(data, name)())
        images.append((f"skimage {name}", np.repeat(a[..., None], 3, 2) if a.ndim == 2 else a[..., :3]))
    images += [(p.relative_to(SHARED).as_posix(), load_rgb(p)) for p in sorted((SHARED / "reference-images").glob("*/*"))
               if p.suffix.lower() in (".bmp", ".png", ".gif")]
    rows, t0 = [], time.time()
    for name, rgb in images:
        x = to_tensor(np.ascontiguousarray(rgb))[None]
        with torch.no_grad():
            ours, p32, p64 = float(native(x)[0]), float(theirs(x)), float(theirs.net(x.double()))
        row = {"image": name, "flat_share": float(native.last_flat_share[0]), "native": ours, "pyiqa": p32,
               "pyiqa_float64": p64, "rel_float32": abs(ours - p32) / max(abs(p32), 1),
               "rel_float64": abs(ours - p64) / max(abs(p64), 1)}
        row["within_1e-2_of_either"] = min(row["rel_float32"], row["rel_float64"]) <= 1e-2
        rows.append(row)
        print(f"{name:34s} flat {row['flat_share']:.4f} native {ours:9.4f} pyiqa {p32:9.4f} (float64 {p64:9.4f}) "
              f"rel {row['rel_float32']:.1e} / {row['rel_float64']:.1e}", flush=True)
    out = write_results(results_path(__file__), {
        "command": "python -m bench.metrics.brisque_bound", "environment": environment(), "pyiqa": pyiqa.__version__,
        "seconds": round(time.time() - t0), "rows": rows,
        "max_rel_float32": max(r["rel_float32"] for r in rows),
        "max_rel_either": max(min(r["rel_float32"], r["rel_float64"]) for r in rows)})
    print(f"written {out}")


if __name__ == "__main__":
    main()
