"""What running a user's evaluate module in a process of its own costs (`banana100.metrics.usermodule`: its
exit, hang or chdir cannot touch `score` any more) against loading and calling it in the command's process.

    python -m bench.metrics.user_module_cost --images 40 --side 256 --repeats 3

Runs `banana100 score IMAGES --metrics ./brightness` (a small module of docs/own-metric.md's shape) in a fresh
Python process each time, both ways, alternately, `--repeats` times each into a fresh --out: what a user
waits for, imports and the module's load and probe included. In-process is the same command with
`usermodule.ModuleWorker` replaced by a class that loads and calls the module in the command's process.
Median seconds and their ratio in bench/results/metrics/user_module_cost.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from banana100.testing.usermodules import brightness_module, write_module

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import alternating, results_path, write_results

IN_PROCESS = """
import sys
import evaluate
from banana100.metrics import usermodule


class InProcess:  # the module loaded and called in this process (before): what ModuleWorker replaced
    def __init__(self, name):
        self.module = evaluate.load(name)
        self.info = {"name": str(getattr(self.module, "name", "") or "")}

    def compute(self, *, images):
        return self.module.compute(images=images)

    def close(self):
        pass


usermodule.ModuleWorker = InProcess
from banana100.cli import main
sys.exit(main(sys.argv[1:]))
"""
OWN_PROCESS = "import sys\nfrom banana100.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=40)
    ap.add_argument("--side", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import numpy as np
    from PIL import Image

    work = Path(tempfile.mkdtemp(prefix="b100-usermodule-"))
    write_module(work, "brightness", brightness_module())
    (work / "imgs").mkdir()
    rng = np.random.default_rng(0)
    for k in range(args.images):
        Image.fromarray(rng.integers(0, 255, (args.side, args.side, 3), np.uint8)).save(work / "imgs" / f"{k:03d}.png")
    def scoring(code):
        def score(r):
            subprocess.run([sys.executable, "-c", code, "score", "imgs", "--metrics", "./brightness", "--out",
                            f"{code is OWN_PROCESS}-{r}.parquet", "--device", "cpu"], cwd=work, check=True,
                           capture_output=True)
        return score

    times, med = alternating({"in_process": scoring(IN_PROCESS), "own_process": scoring(OWN_PROCESS)}, args.repeats)
    shutil.rmtree(work)
    result = {"images": args.images, "side": args.side, "repeats": args.repeats, "seconds": times, "median_s": med,
              "added_s": med["own_process"] - med["in_process"], "ratio_own_over_in": med["own_process"] / med["in_process"],
              "command": f"python -m bench.metrics.user_module_cost --images {args.images} --side {args.side} "
                         f"--repeats {args.repeats}"}
    write_results(results_path(__file__), result)
    print(json.dumps({k: result[k] for k in ("median_s", "added_s", "ratio_own_over_in")}, indent=1))


if __name__ == "__main__":
    main()
