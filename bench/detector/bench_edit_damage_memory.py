"""Peak memory of edit_damage's whole-image path (the one a GPU takes), against an older detector, on the CPU.

    python -m bench.detector.bench_edit_damage_memory [--baseline COMMIT_OR_FILE] [--images 4] [--side 1024]
        [--rounds 3] [--out bench/results/detector/edit_damage_memory.json]

Each round measures the current detector and the baseline (a commit's or a file's EditDamage, as
bench_edit_damage.py's --baseline), each in a fresh process: one batch of --images chain images of --side px
through `_measure(x, at_points=False)`, the peak resident memory above what the process held just before it (MB;
on Linux the process's peak is reset there, /proc/self/clear_refs, so that no earlier peak of the imports hides it).
No GPU is needed, so no GPU figure. The child runs with glibc's mmap threshold fixed at 64 KiB
(MALLOC_MMAP_THRESHOLD_): every plane is then its own mapping, returned when freed, so the peak resident memory is
the peak of the tensors alive at once, as a GPU's allocator would hold them (with glibc's default, a threshold that
rises as planes are freed, freed planes stayed resident and the figures swung by 2x between rounds). Every round is
kept and the ratio is of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import REPO, environment, results_path, write_results
from bench.detector.baseline import detector_as_of

MMAP_THRESHOLD = 64 * 1024  # bytes: glibc maps every allocation above it on its own (module docstring)


def _child(where: str, images: int, side: int) -> None:
    """In a fresh process: the peak resident memory (MB) one batch adds, printed as JSON."""
    import resource

    import numpy as np
    import torch

    from banana100.testing.images import chain_images

    if where == "current":
        from banana100.metrics.detector import model
    else:
        model = detector_as_of(where)
    x = torch.from_numpy(np.stack(chain_images(images, side))).permute(0, 3, 1, 2).float() / 255
    detector = model.EditDamage()
    status = Path("/proc/self/status")
    if status.is_file():  # Linux: the peak is reset to what is resident now, so no earlier peak (imports) hides it
        Path("/proc/self/clear_refs").write_text("5")
        before = _status_kb(status, "VmRSS")
    else:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with torch.inference_mode():
        detector._measure(x, at_points=False)
    peak = _status_kb(status, "VmHWM") if status.is_file() else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_mb": (peak - before) / 1024}))


def _status_kb(status: Path, field: str) -> int:
    """A memory figure of /proc/self/status, kB."""
    line = next(line for line in status.read_text().splitlines() if line.startswith(field + ":"))
    return int(line.split()[1])


def _measure(where: str, images: int, side: int) -> float:
    out = subprocess.run([sys.executable, "-m", "bench.detector.bench_edit_damage_memory", "--child", where,
                          "--images", str(images), "--side", str(side)], cwd=REPO, capture_output=True, text=True,
                         check=True, env={**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD)})
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mb"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="ad8ec7b", help="a commit or a file of an older model.py")
    ap.add_argument("--images", type=int, default=4)
    ap.add_argument("--side", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(results_path(__file__)))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.images, args.side)
        return 0
    rounds = [{"current_mb": _measure("current", args.images, args.side),
               "baseline_mb": _measure(args.baseline, args.images, args.side)} for _ in range(args.rounds)]
    current = statistics.median(r["current_mb"] for r in rounds)
    baseline = statistics.median(r["baseline_mb"] for r in rounds)
    results = {"command": "python -m bench.detector.bench_edit_damage_memory " + " ".join(argv or sys.argv[1:]),
               "environment": environment(), "images": args.images, "side": args.side, "baseline": args.baseline,
               "rounds": rounds, "median_current_mb": current, "median_baseline_mb": baseline,
               "current_over_baseline": current / baseline}
    write_results(Path(args.out), results)
    print(f"whole-image path, {args.images} x {args.side} px: current {current:.0f} MB, baseline ({args.baseline}) "
          f"{baseline:.0f} MB, x{current / baseline:.2f} (medians of {args.rounds} rounds); written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
