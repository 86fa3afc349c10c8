"""Native BRISQUE vs pyiqa on synthetic graphics with many flat levels (issue 12's hard case for
the flat repair: more distinct flat values than `repair.FLAT_VALUES_MAX`, so part of them go by
value and the rest through the row strips).

    python -m bench.metrics.bench_flat_graphics [--rounds 3]

Images: uniform grey noise with N flat squares of N different grey levels (36 squares of 80 px
at 512 px; 100 of 200 px and 400 of 96 px at 2048 px). One thread, CPU time, best of `--rounds`
after a warm-up, the engine's allocator settings. Writes bench/results/metrics/flat_graphics.json.
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

from bench.benchtools import PARAMS, RESULTS, best_time, write_results

CASES = ((512, 36, 80), (2048, 100, 200), (2048, 400, 96))


def many_squares(size: int, n: int, patch: int) -> np.ndarray:
    """size x size grey noise with n flat patch x patch squares, square k at grey level 37 k mod 256."""
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (size, size), dtype=np.uint8)
    k = 0
    for top in range(0, size - patch, patch + 4):
        for left in range(0, size - patch, patch + 4):
            if k < n:
                img[top : top + patch, left : left + patch] = (k * 37) % 256
                k += 1
    return np.repeat(img[..., None], 3, axis=2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    import pyiqa

    from banana100.metrics.engine.scorer import keep_freed_memory, to_tensor
    from banana100.metrics.native import brisque, build

    keep_freed_memory()
    params = PARAMS
    ours = build("brisque", {f: params / f for f in (brisque.MODEL_FILE, brisque.RANGE_FILE)}, "pyiqa")
    theirs = pyiqa.create_metric("brisque", pretrained_model_path=str(params / "brisque_svm_weights.pth"), device="cpu")
    rows = []
    for size, n, patch in CASES:
        x = to_tensor(many_squares(size, n, patch))[None]
        with torch.no_grad():
            t_native, a = best_time(lambda: float(ours(x)[0]), args.rounds, clock=time.process_time)
            t_pyiqa, b = best_time(lambda: float(theirs(x)), args.rounds, clock=time.process_time)
        rows.append({"size": size, "squares": n, "patch": patch, "flat_share": float(ours.last_flat_share[0]),
                     "native_s": t_native, "pyiqa_s": t_pyiqa, "native": a, "pyiqa": b,
                     "abs_rel_diff": abs(a - b) / max(abs(b), 1.0)})
        print(f"{size} px, {n} squares of {patch}: native {t_native * 1e3:.1f} ms, pyiqa {t_pyiqa * 1e3:.1f} ms "
              f"(x{t_pyiqa / t_native:.1f}); scores {a:.4f} / {b:.4f}")
    out = RESULTS / "metrics" / "flat_graphics.json"
    write_results(out, {"rows": rows})
    print(f"written {out}")


if __name__ == "__main__":
    main()
