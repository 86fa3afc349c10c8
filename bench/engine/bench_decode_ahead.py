"""`banana100 score` with the one decode-ahead (threads, `banana100.imageio.decode_ahead`) against
the DataLoader worker processes it replaced (issue 14), like for like.

    git worktree add /tmp/before-decode cad6c07      # the last commit with the DataLoader
    python -m bench.engine.bench_decode_ahead --before /tmp/before-decode [--rounds 3] [--metrics piqe]

Each round scores the same run folder (2 chains x 40 steps of 512x512 PNGs, made once with
banana100/testing/runfolder.py) with `score_to_parquet(..., decode_workers=2, batch_size=8)` in a fresh
subprocess per checkout, before and after alternately, and times the whole call (model build,
decoding, scoring, Parquet writing). Reports the median over rounds of after / before. Writes
bench/results/engine/decode_ahead.json.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import REPO, RESULTS, write_results

CHILD = r"""
import sys, time, torch
sys.path.insert(0, {root!r})  # the checkout under test
torch.set_num_threads(2)
from banana100.scoring import score_to_parquet
t = time.perf_counter()
score_to_parquet({run!r}, {metrics!r}, {out!r}, device="cpu", batch_size=8, progress=False, decode_workers=2)
print(time.perf_counter() - t)
"""


def timed(root: Path, run: Path, metrics: list[str], out: Path) -> float:
    out.unlink(missing_ok=True)
    code = CHILD.format(root=str(root), run=str(run), metrics=metrics, out=str(out))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    if proc.returncode:
        raise SystemExit(f"{root}: {proc.stderr[-2000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, type=Path, help="a checkout with the DataLoader decoding")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--metrics", default="piqe")
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    metrics = args.metrics.split(",")
    from banana100.testing.runfolder import make_run_folder

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        make_run_folder(run, steps=args.steps, size=(512, 512))
        rows = []
        for r in range(args.rounds):
            before = timed(args.before.resolve(), run, metrics, Path(tmp) / "before.parquet")
            after = timed(REPO, run, metrics, Path(tmp) / "after.parquet")
            rows.append({"round": r, "before_s": before, "after_s": after, "ratio": after / before})
            print(f"round {r}: after/before = {after / before:.2f}", flush=True)
    result = {"metrics": metrics, "images": 2 * (args.steps + 1), "size": 512, "decode_workers": 2,
              "rounds": rows, "median_ratio": statistics.median(x["ratio"] for x in rows)}
    write_results(RESULTS / "engine" / "decode_ahead.json", result)
    print(f"median after/before: {result['median_ratio']:.2f}")


if __name__ == "__main__":
    main()
