"""`banana100 score --metrics edit_damage` on chains (which adds edit_damage_rel): each image
measured once for both scores (`edit_damage_rel.SharedBareScorer`) against the engine's own
edit_damage beside edit_damage_rel (each image measured twice, before the sharing).

    python -m bench.detector.bench_edit_damage_shared [--steps 10] [--side 512] [--rounds 3]

One process, one run folder (2 chains of --steps + 1 images), `score_to_parquet` into a fresh
file per call, the two ways alternating round by round; the clock is the process's CPU time with
one torch thread (the shared build machine's wall time swings several-fold). Scores must be
equal both ways (the script stops otherwise).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import environment, results_path, scratch_dir, write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--side", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import pyarrow.parquet as pq
    import torch

    from banana100 import scoring
    from banana100.metrics.detector import relative as rel
    from banana100.testing.runfolder import make_run_folder

    torch.set_num_threads(1)
    tmp = scratch_dir("ed-shared-")
    make_run_folder(tmp / "run", steps=args.steps, size=(args.side, args.side))
    shared_scorer = rel.SharedBareScorer
    calls = {"shared": 0, "separate": 0}

    def score(way: str):
        rel.SharedBareScorer = shared_scorer if way == "shared" else (lambda bare, relative: bare)
        calls[way] += 1
        out = tmp / f"{way}-{calls[way]}.parquet"
        t = time.process_time()
        scoring.score_to_parquet(tmp / "run", ["edit_damage"], out, device="cpu", progress=False, decode_workers=0)
        took = time.process_time() - t
        rows = sorted((r["image"], r["metric"], r["score"]) for r in pq.read_table(out).to_pylist())
        return took, rows

    best = {"shared": float("inf"), "separate": float("inf")}
    results = {}
    for _ in range(args.rounds):
        for way in ("separate", "shared"):
            took, rows = score(way)
            best[way] = min(best[way], took)
            results[way] = rows
    rel.SharedBareScorer = shared_scorer
    if results["shared"] != results["separate"]:
        raise SystemExit("scores differ between the two ways")
    row = {"images": len(results["shared"]) // 2, "side": args.side, "separate_cpu_s": round(best["separate"], 3),
           "shared_cpu_s": round(best["shared"], 3), "shared_over_separate": round(best["shared"] / best["separate"], 3)}
    print(row)
    out = Path(args.out) if args.out else results_path(__file__)
    write_results(out, {"command": "python -m bench.detector.bench_edit_damage_shared " + " ".join(sys.argv[1:]),
                        "environment": environment(), "rows": [row]})
    print(f"written to {out}")


if __name__ == "__main__":
    main()
