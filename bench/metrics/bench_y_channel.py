"""pyiqa's Y channel on CPU: the Y column alone (`matlab.pyiqa_y_channel` now) vs the 3-column
product it replaced (pyiqa's `to_y_channel`, which the native code used to repeat), side by side.

    python -m bench.metrics.bench_y_channel [--sizes 512,2048] [--rounds 21] [--threads 1]

Each round times both on the same image (a simulated-editor coffee frame), alternating which goes
first, in CPU time (time.process_time: other jobs on a shared machine inflate it far less than wall
time). Checks the two are equal bit for bit. Reports the median and minimum of new / old per size;
writes bench/results/metrics/y_channel.json.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import sys
from pathlib import Path
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, write_results


def three_columns(x: torch.Tensor, color_space: str) -> torch.Tensor:
    """pyiqa's to_y_channel(x, 255, color_space) as float64: what the native code did before."""
    from pyiqa.utils.color_util import to_y_channel

    return to_y_channel(x, 255, color_space).to(torch.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="512,2048")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(RESULTS / "metrics" / "y_channel.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from banana100.testing.images import chain_images

    from banana100.metrics.engine.scorer import to_tensor
    from banana100.metrics.native import matlab

    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        x = to_tensor(chain_images(2, size)[1])[None]
        for space in ("yiq", "ycbcr"):
            new = lambda: matlab.pyiqa_y_channel(x, space)  # noqa: E731
            old = lambda: three_columns(x, space)  # noqa: E731
            if not torch.equal(new(), old()):
                raise SystemExit(f"{space} {size}px: the Y column alone differs from the 3-column product")
            times = {"new": [], "old": []}
            for r in range(args.rounds):
                for name in (("new", "old") if r % 2 else ("old", "new")):
                    fn = new if name == "new" else old
                    t = time.process_time()
                    fn()
                    times[name].append(time.process_time() - t)
            ratio_median = statistics.median(times["new"]) / statistics.median(times["old"])
            ratio_min = min(times["new"]) / min(times["old"])
            rows.append({"size": size, "color_space": space, "rounds": args.rounds,
                         "new_over_old_median": ratio_median, "new_over_old_min": ratio_min,
                         "seconds_new": times["new"], "seconds_old": times["old"]})
            print(f"{size:5d} px {space:6s} new/old: median x{ratio_median:.3f}, min x{ratio_min:.3f}")
    write_results(args.out, {"threads": args.threads, "torch": torch.__version__, "rows": rows})


if __name__ == "__main__":
    main()
