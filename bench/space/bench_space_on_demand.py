"""What the Space's on-demand scoring costs on one release chain, measured side by side.

    BANANA100_WEIGHTS=../shared/iqa-params python -m bench.space.bench_space_on_demand [--side 2048] [--steps 100]

Makes a local stand-in of the release (banana100/testing/releasetools.py: one chain, `--steps` steps of
`--side` px generated-source images, laid out as the Hub repository) and, in one run, times:

1. first show: list the release, fetch + import the chain, score it on demand with PIQE, NIQE and
   BRISQUE on CPU (the Space's `explore.ON_DEMAND_STEPS`);
2. the same metrics over every step of the chain (what scoring the whole chain would cost);
3. a second visit: reopen with the cache in place (nothing fetched or scored).

Prints ratios (1 vs 2, 3 vs 1) and the image counts; writes bench/results/space/space_on_demand.json.
"""

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import sys
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, write_results

from banana100.testing.releasetools import make_release_standin

from banana100 import explore as ex

METRICS = ["piqe", "niqe", "brisque"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--side", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--out", type=Path, default=RESULTS / "space" / "space_on_demand.json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-space-"))
    try:
        standin = make_release_standin(work / "release", sources=("dunes",), repeats=1, steps=args.steps,
                                       side=args.side)
        spec = ex.ReleaseSpec(str(standin), ex.ORIGINAL_RELEASE.pattern)
        cid = "dunes__replicate__r0"
        ex.open_release(spec, work / "warm", METRICS).score_chain(cid)  # warm-up: imports, models, caches

        t0 = time.perf_counter()
        first = ex.open_release(spec, work / "cache", METRICS)
        first.score_chain(cid)
        t_first = time.perf_counter() - t0
        n_on_demand = first.scored_chains() and int((first.scores["metric"] == "piqe").sum())

        t0 = time.perf_counter()
        whole = ex.ChainScores(work / "whole", steps=range(args.steps + 1))
        info, images = first.info(cid), first.images.originals(cid)
        for m in METRICS:
            whole.compute(info, m, images)
        t_whole = time.perf_counter() - t0

        t0 = time.perf_counter()
        again = ex.open_release(spec, work / "cache", METRICS)
        again.score_chain(cid)
        again.image(cid, args.steps)
        t_again = time.perf_counter() - t0
        assert again.scored_chains() == 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"side": args.side, "steps": args.steps, "metrics": METRICS, "images_on_demand": n_on_demand,
              "images_whole_chain": args.steps + 1, "whole_over_first_show": round(t_whole / t_first, 2),
              "first_show_over_second_visit": round(t_first / t_again, 1)}
    write_results(args.out, result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
