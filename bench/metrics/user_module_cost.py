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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from banana100.testing.usermodules import brightness_module, write_module

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
    times: dict[str, list[float]] = {"in_process": [], "own_process": []}
    for r in range(args.repeats):
        for name, code in (("in_process", IN_PROCESS), ("own_process", OWN_PROCESS)):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code, "score", "imgs", "--metrics", "./brightness", "--out",
                            f"{name}-{r}.parquet", "--device", "cpu"], cwd=work, check=True, capture_output=True)
            times[name].append(time.perf_counter() - t)
    shutil.rmtree(work)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {"images": args.images, "side": args.side, "repeats": args.repeats, "seconds": times, "median_s": med,
              "added_s": med["own_process"] - med["in_process"], "ratio_own_over_in": med["own_process"] / med["in_process"],
              "command": f"python -m bench.metrics.user_module_cost --images {args.images} --side {args.side} "
                         f"--repeats {args.repeats}"}
    out = Path(__file__).resolve().parents[1] / "results" / "metrics" / "user_module_cost.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("median_s", "added_s", "ratio_own_over_in")}, indent=1))


if __name__ == "__main__":
    main()
