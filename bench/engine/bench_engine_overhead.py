"""The engine's time against the model's own forward at 2K, the engine before issue 30 beside it.

    python -m bench.engine.bench_engine_overhead [--metrics piqe,brisque,niqe,edit_damage] [--n 2] [--side 2048]
                                          [--batch-size N] [--rounds 3] [--device cpu] [--baseline 4fc4520]

Per metric, in one process and interleaved round by round on the same arrays:
- model: `scorer.model(x)` on each float batch already built (what the engine cannot beat);
- engine: `MetricScorer.score_arrays(arrays)` (uint8 upload, conversion on the device, results
  fetched once);
- baseline: the same call through the engine of `--baseline` (its engine.py loaded from git: float
  conversion per image on the host, a wait per batch).
Each one's best round; the ratios engine / model and baseline / model are the goal's measure
(issue 30: at most 1.15 on CPU at 2K). Scores must be equal on all three paths.

--n images in batches of --batch-size (default: one batch of --n). On a GPU give several batches
(`--n 32 --batch-size 8`): the engine uploads batch k+1 while batch k computes, which one batch
cannot show; the model's time is then the sum of its forwards on the resident batches.

On CPU the clock is the process's CPU time (`--clock cpu`, the default there) with `--threads 1`:
on the shared build machine wall time swung 2-10x between identical calls, CPU time counts only
this process's own work. On a GPU it is wall time after a synchronize.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, environment, module_as_of, results_path, write_results


def baseline_engine(commit: str):
    """The engine module of `commit` (its engine.py as it was), or of a file of that source; None for "none"."""
    return None if commit == "none" else module_as_of(
        commit, ("banana100/metrics/engine/scorer.py", "banana100/metrics/engine.py"), "engine_baseline")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", default="piqe,brisque,niqe,edit_damage")
    ap.add_argument("--n", type=int, default=2, help="images")
    ap.add_argument("--batch-size", type=int, default=None, help="images per batch (default: --n, one batch)")
    ap.add_argument("--side", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--baseline", default="4fc4520",
                    help="the commit whose engine is the baseline, a file of its engine.py, or none")
    ap.add_argument("--clock", choices=("cpu", "wall"), default=None, help="default: cpu on CPU, wall on a GPU")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    ap.add_argument("--out", default=None, help="results file (default bench/results/engine/engine_overhead[_<device>].json)")
    args = ap.parse_args()

    import os

    import torch

    from banana100.metrics.engine.scorer import MetricScorer, to_tensor
    from banana100.testing.images import chain_images

    os.environ.setdefault("BANANA100_WEIGHTS", str(PARAMS))
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    clock_name = args.clock or ("cpu" if device.type == "cpu" else "wall")
    clock = time.process_time if clock_name == "cpu" else time.perf_counter
    old = baseline_engine(args.baseline)
    distinct = chain_images(min(args.n, 8), args.side)  # 0.8 s each at 2K: a few, then repeated
    arrays = [distinct[i % len(distinct)] for i in range(args.n)]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rows = []
    for metric in args.metrics.split(","):
        bs = args.batch_size or args.n
        new = MetricScorer(metric, device=device, batch_size=bs)
        base = old.MetricScorer(metric, device=device, batch_size=bs) if old else None
        xs = [torch.stack([to_tensor(a) for a in arrays[k: k + bs]]).to(device) for k in range(0, args.n, bs)]

        def model():
            with torch.no_grad():
                out = torch.cat([new.model(x).reshape(-1) for x in xs])
            sync()
            return out

        def engine(scorer):
            out = scorer.score_arrays(arrays)
            sync()
            return out

        runs = {"model": model, "engine": lambda: engine(new)}
        if base is not None:
            runs["baseline"] = lambda: engine(base)
        best = {k: float("inf") for k in runs}
        results = {k: f() for k, f in runs.items()}  # warm-up
        for _ in range(args.rounds):
            for name, fn in runs.items():
                t = clock()
                fn()
                best[name] = min(best[name], clock() - t)
        model_scores = [float(v) for v in results["model"].reshape(-1).cpu().tolist()]
        if not (results["engine"] == results.get("baseline", model_scores) == model_scores):
            raise SystemExit(f"{metric}: scores differ: engine {results['engine']}, baseline "
                             f"{results.get('baseline')}, model {model_scores}")
        row = {"metric": metric, "images": args.n, "batch_size": bs, "side": args.side, **{f"{k}_s": round(v, 4) for k, v in best.items()},
               **{f"{k}_over_model": round(best[k] / best["model"], 3) for k in runs if k != "model"}}
        rows.append(row)
        print(row, flush=True)
    command = "python -m bench.engine.bench_engine_overhead " + " ".join(sys.argv[1:])
    out = Path(args.out) if args.out else results_path(__file__, "" if device.type == "cpu" else f"_{device.type}")
    write_results(out, {"command": command.strip(), "environment": environment(), "baseline": args.baseline,
                        "clock": clock_name, "rows": rows})
    print(f"written to {out}")


if __name__ == "__main__":
    main()
