"""Cost of the edit_damage detector against native NIQE, side by side in one process.

    nice python bench/bench_edit_damage.py [--sizes 512,1024] [--batches 1,8] [--images 8] [--rounds 3]
        [--device cpu] [--params ../shared/iqa-params] [--baseline OLD_edit_damage.py]

Both metrics score the same images (steps of a simulated-editor chain of skimage's coffee,
`bench_native.chain_images`) with the engine (`MetricScorer.score_arrays`), alternating round
by round so that load on the machine hits both alike; each figure is the best round. The ratio
edit_damage / NIQE is the result (the issue asks for at most NIQE's cost per image); absolute
seconds depend on the machine. NIQE needs niqe_modelparameters.mat (BANANA100_WEIGHTS or --params).

--baseline FILE times an older edit_damage.py beside them, in the same rounds (e.g.
`git show 1f7770c:banana100/metrics/native/edit_damage.py > /tmp/edit_damage_old.py`): the row's
`edit_damage_over_baseline` is a change's cost, side by side.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from benchtools import PARAMS, REPO, write_results

from banana100.testing.images import chain_images


def baseline_scorer(path: str, device: str, batch: int):
    """The engine around the EditDamage module of an older edit_damage.py (guarded as the current one)."""
    import importlib.util

    from banana100.metrics import native
    from banana100.metrics.engine import MetricScorer

    spec = importlib.util.spec_from_file_location("edit_damage_baseline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scorer = MetricScorer.from_model("edit_damage", native._exact_forward(module.EditDamage()), device=device,
                                     batch_size=batch)
    scorer.backend = "native"  # batched like the current one (from_model assumes a pyiqa arch)
    return scorer


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="512,1024")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--params", default=str(PARAMS))
    ap.add_argument("--baseline", default=None, help="an older edit_damage.py to time beside the current one")
    ap.add_argument("--out", default=str(REPO / "banana100/metrics/native/edit_damage_cost.json"))
    args = ap.parse_args(argv)
    os.environ.setdefault("BANANA100_WEIGHTS", args.params)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from banana100.metrics.engine import MetricScorer

    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        images = chain_images(args.images, size)
        for batch in (int(b) for b in args.batches.split(",")):
            scorers = {m: MetricScorer(m, device=args.device, batch_size=batch) for m in ("niqe", "edit_damage")}
            if args.baseline:
                scorers["baseline"] = baseline_scorer(args.baseline, args.device, batch)
            for s in scorers.values():  # warm-up: allocator, caches
                s.score_arrays(images[:batch])
            best = {m: {"wall": float("inf"), "cpu": float("inf")} for m in scorers}
            for _ in range(args.rounds):
                for m, s in scorers.items():
                    if args.device.startswith("cuda"):
                        torch.cuda.synchronize()
                    w, c = time.perf_counter(), time.process_time()
                    s.score_arrays(images)
                    if args.device.startswith("cuda"):
                        torch.cuda.synchronize()
                    best[m]["wall"] = min(best[m]["wall"], (time.perf_counter() - w) / len(images))
                    best[m]["cpu"] = min(best[m]["cpu"], (time.process_time() - c) / len(images))
            row = {"size": size, "batch": batch, "images": len(images),
                   "niqe_s_per_image": best["niqe"]["wall"], "edit_damage_s_per_image": best["edit_damage"]["wall"],
                   "niqe_cpu_s_per_image": best["niqe"]["cpu"], "edit_damage_cpu_s_per_image": best["edit_damage"]["cpu"],
                   "ratio_wall": best["edit_damage"]["wall"] / best["niqe"]["wall"],
                   "ratio_cpu": best["edit_damage"]["cpu"] / best["niqe"]["cpu"]}
            if args.baseline:
                row.update(baseline_cpu_s_per_image=best["baseline"]["cpu"],
                           edit_damage_over_baseline_cpu=best["edit_damage"]["cpu"] / best["baseline"]["cpu"],
                           edit_damage_over_baseline_wall=best["edit_damage"]["wall"] / best["baseline"]["wall"])
                print(f"{size}px batch {batch}: edit_damage / baseline = {row['edit_damage_over_baseline_cpu']:.2f} CPU, "
                      f"{row['edit_damage_over_baseline_wall']:.2f} wall", flush=True)
            rows.append(row)
            print(f"{size}px batch {batch}: edit_damage / NIQE = {row['ratio_wall']:.2f} wall, {row['ratio_cpu']:.2f} CPU "
                  f"(NIQE {row['niqe_s_per_image']:.3f} s, edit_damage {row['edit_damage_s_per_image']:.3f} s per image)",
                  flush=True)
    env = {"python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform(),
           "device": args.device, "threads": torch.get_num_threads(), "cpus": os.cpu_count()}
    write_results(args.out, {"command": "python bench/bench_edit_damage.py " + " ".join(argv or sys.argv[1:]),
                             "environment": env, "rows": rows})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
