"""The two ways `repair.repair_filtered` recomputes pyiqa's convolution outputs, on the maps where
IL-NIQE needs them: window by window (`repair.conv2d_at`) vs the row strips that hold them
(`repair.conv2d_rows`), same values bit for bit.

    python -m bench.metrics.bench_repair_paths [--rounds 3]

Runs the native IL-NIQE (mode "pyiqa", CPU, one thread) on the second frame of
`banana100.testing.images.flat_chain_images(2, 512)` (a clipped sky: thousands of flat windows), captures the
maps and masks of its full-scale derivative repair, and times both paths per map (CPU time,
best of `--rounds`). Writes bench/results/metrics/repair_paths.json.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

import sys
from pathlib import Path
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, RESULTS, best_time, write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)

    from banana100.testing.images import flat_chain_images

    from banana100.metrics.engine.scorer import to_tensor
    from banana100.metrics.native import build, ilniqe, matlab, repair

    params = PARAMS
    if not (params / ilniqe.PARAM_FILE).is_file():
        raise SystemExit(f"{ilniqe.PARAM_FILE} not found in {params}")
    model = build("ilniqe", {ilniqe.PARAM_FILE: params / ilniqe.PARAM_FILE}, "pyiqa")
    captured = []
    original = repair.repair_filtered

    def capture(out, x, weight, padding, bound):
        captured.append((out.clone(), x.clone(), weight, padding, bound))
        return original(out, x, weight, padding, bound)

    repair.repair_filtered = capture  # ilniqe calls it through the module: every call is captured
    try:
        with torch.no_grad():
            model(to_tensor(flat_chain_images(2, 512)[1])[None])
    finally:
        repair.repair_filtered = original
    if not captured:
        raise SystemExit("no repair_filtered call was captured: has IL-NIQE stopped calling it?")

    rows = []
    for call, (out, x, weight, padding, bound) in enumerate(captured):
        kh, kw = weight.shape[-2:]
        w4 = weight.to(x.dtype).reshape(1, 1, kh, kw)
        for n in range(x.shape[0]):
            mask = out[n].abs() <= bound
            if int(mask.sum()) <= repair.AT_CHUNK:
                continue  # small repairs took the windows before and after the change
            padded = matlab.pad_same(x[n][None, None], kh, kw, padding)
            t_strips, strips = best_time(lambda: repair.conv2d_rows(padded, w4, mask.any(-1))[0, 0], args.rounds,
                                         clock=time.process_time, warm_up=False)
            index = F.pad(mask.nonzero(), (1, 0))
            t_windows, windows = best_time(lambda: repair.conv2d_at(padded, w4, index), args.rounds,
                                           clock=time.process_time, warm_up=False)
            if not torch.equal(strips[mask], windows):
                raise SystemExit(f"call {call} map {n}: the two paths differ")
            rows.append({"call": call, "map": n, "kernel": [kh, kw], "dtype": str(x.dtype), "values": int(mask.sum()),
                         "pixels": mask.numel(), "strips_s": t_strips, "windows_s": t_windows})
            print(f"call {call} map {n}: {rows[-1]['values']:6d} values of {mask.numel()}: strips {t_strips * 1e3:7.1f} ms, "
                  f"windows {t_windows * 1e3:6.1f} ms (x{t_windows / t_strips:.3f})")
    out_file = RESULTS / "metrics" / "repair_paths.json"
    write_results(out_file, {"rows": rows})
    print(f"written {out_file}")


if __name__ == "__main__":
    main()
