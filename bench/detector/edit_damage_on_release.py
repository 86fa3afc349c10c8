"""The paper's protocol for the edit_damage detector on a real release, in one command.

    python -m bench.detector.edit_damage_on_release [LOCATION] [--pattern PATTERN] [--limit N] [--device cuda]
        [--cache ~/.cache/banana100-space] [--out bench/results/detector/edit_damage_release.json]

LOCATION: the Hub dataset id (default: the original release, `kenantang/Banana100`), an hf:// URL
or a local folder. PATTERN: the layout of its image files, as the Space reads the release
(`explore.ReleaseSpec`; default: the Space's `{setting}/{source}/rep{repeat}/img_{step:03d}.png`).
For the `more_models` supplement give its layout, e.g. `--pattern
"more_models/{setting}/{source}/rep{repeat}/img_{step:03d}.png"` (check the files first).

Each chain is fetched and imported as the Space does it (checked images in a run folder under
--cache), scored with edit_damage and edit_damage_rel (against the chain's step 0) at the
protocol's steps (cached: a rerun resumes), and the protocol's figures are written per metric,
per setting and overall, with every chain's verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

from pathlib import Path
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, write_results

from banana100 import explore as ex
from banana100.protocol import sensitivity


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("location", nargs="?", default=ex.ORIGINAL_RELEASE.location)
    ap.add_argument("--pattern", default=ex.ORIGINAL_RELEASE.pattern)
    ap.add_argument("--limit", type=int, default=None, help="score only the first N chains")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cache", default=str(ex.DEFAULT_CACHE))
    ap.add_argument("--out", default=str(RESULTS / "detector" / "edit_damage_release.json"))
    args = ap.parse_args(argv)
    images = ex.ReleaseChains(ex.ReleaseSpec(location=args.location, pattern=args.pattern), args.cache)
    explorer = ex.Explorer(images, None, on_demand=ex.ChainScores(images.cache / "scores", device=args.device),
                           metrics=list(ex.DETECTORS))
    chains = explorer.chain_ids()[: args.limit]
    for i, cid in enumerate(chains, 1):
        explorer.score_chain(cid, metrics=list(ex.DETECTORS))
        print(f"[{i}/{len(chains)}] {cid}", flush=True)
    settings = {cid: images.chains[cid].setting for cid in chains}
    by_setting = defaultdict(list)
    for cid in chains:
        by_setting[settings[cid]].append(cid)
    result = {"command": "python -m bench.detector.edit_damage_on_release " + " ".join(argv or sys.argv[1:]),
              "location": args.location, "pattern": args.pattern, "per_metric": {}}
    for metric in ex.DETECTORS:
        table = explorer.scores
        table = table[(table["metric"] == metric) & table["chain_id"].isin(chains)]
        out = result["per_metric"][metric] = {"per_setting": {}}
        for setting, ids in [("all", chains), *sorted(by_setting.items())]:
            t = table[table["chain_id"].isin(ids)]
            p = sensitivity(t["score"].tolist(), t["step"].tolist(), t["chain_id"].tolist(), lower_better=True)
            out["per_setting"][setting] = {k: p[k] for k in ("n_chains", "n_failed", "n_incomplete", "failure_rate",
                                                             "mean_rho", "share_last_worse")}
            if setting == "all":
                out["per_chain"] = p["per_chain"]
            print(f"{metric}, {setting}: failed {p['n_failed']} of {p['n_chains'] - p['n_incomplete']} complete "
                  f"chains, mean rho {p['mean_rho']}", flush=True)
    write_results(args.out, json.loads(json.dumps(result, default=str)))  # numpy and other values as text
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
