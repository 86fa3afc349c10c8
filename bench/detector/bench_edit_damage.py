"""Cost of the edit_damage detector against native NIQE, side by side in one process.

    nice python -m bench.detector.bench_edit_damage [--sizes 512,1024] [--batches 1,8] [--images 8] [--rounds 3]
        [--device cpu] [--threads N] [--params ../shared/iqa-params] [--baseline COMMIT_OR_FILE] [--told-the-source]

Both metrics score the same images (steps of a simulated-editor chain of skimage's coffee,
`bench_native.chain_images`) with the engine (`MetricScorer.score_arrays`), alternating round
by round so that load on the machine hits both alike; each figure is the best round. The ratio
edit_damage / NIQE is the result (the issue asks for at most NIQE's cost per image); absolute
seconds depend on the machine. NIQE needs niqe_modelparameters.mat (BANANA100_WEIGHTS or --params).

--baseline COMMIT (or a file of an older edit_damage.py) times that detector beside them, in the
same rounds: the row's `edit_damage_over_baseline` is a change's cost, side by side.
--told-the-source times, in the same rounds, what edit_damage_rel measures of each image (the bare components and
its own colour_softness, since version 11): the row's `told_the_source_over_edit_damage_cpu`.
--profile SIDE instead prints where one SIDE px image's time goes (torch's profiler, the top
operators by own CPU time and the convolutions' share), of the current detector or of --baseline.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from pathlib import Path
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import PARAMS, REPO, write_results
from bench.detector.baseline import detector_as_of

from banana100.testing.images import chain_images


def baseline_scorer(where: str, device: str, batch: int):
    """The engine around the EditDamage module of an older edit_damage.py, a commit's or a file's
    (guarded as the current one)."""
    from banana100.metrics import native
    from banana100.metrics.engine.scorer import MetricScorer

    module = detector_as_of(where)
    scorer = MetricScorer.from_model("edit_damage", native.exact_forward(module.EditDamage()), device=device,
                                     batch_size=batch)
    scorer.backend = "native"  # batched like the current one (from_model assumes a pyiqa arch)
    return scorer


def profile(side: int, baseline: str | None, device: str) -> int:
    """Where one image's time goes, by operator (own CPU time), and the convolutions' share."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    scorer = baseline_scorer(baseline, device, 1) if baseline else None
    from banana100.metrics import native
    from banana100.metrics.engine.scorer import to_tensor

    model = scorer.model if scorer else native.build("edit_damage", {}).to(device)
    x = to_tensor(chain_images(1, side)[0])[None].to(device)
    with torch.no_grad():
        model(x)  # warm-up
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            model(x)
    ops = prof.key_averages()
    total = sum(o.self_cpu_time_total for o in ops)
    conv = sum(o.self_cpu_time_total for o in ops if "conv" in o.key)
    print(ops.table(sort_by="self_cpu_time_total", row_limit=8))
    print(f"{side}px, {'baseline ' + baseline if baseline else 'current'}: convolutions {conv / total:.0%} of "
          f"{total / 1e3:.0f} ms own CPU time")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="512,1024")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch's CPU threads (one: a shared machine's other load does not stall a thread pool)")
    ap.add_argument("--params", default=str(PARAMS))
    ap.add_argument("--baseline", default=None, help="a commit (or a file) whose edit_damage.py is timed beside the current one")
    ap.add_argument("--profile", type=int, default=None, metavar="SIDE", help="profile one SIDE px image and stop")
    ap.add_argument("--told-the-source", action="store_true",
                    help="also time what edit_damage_rel measures of each image (the bare components and its own "
                         "colour_softness) beside the bare detector, in the same rounds")
    ap.add_argument("--out", default=str(REPO / "banana100/metrics/detector/data/edit_damage_cost.json"))
    args = ap.parse_args(argv)
    os.environ.setdefault("BANANA100_WEIGHTS", args.params)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from banana100.metrics.engine.scorer import MetricScorer

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.profile:
        return profile(args.profile, args.baseline, args.device)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        images = chain_images(args.images, size)
        for batch in (int(b) for b in args.batches.split(",")):
            scorers = {m: MetricScorer(m, device=args.device, batch_size=batch) for m in ("niqe", "edit_damage")}
            if args.baseline:
                scorers["baseline"] = baseline_scorer(args.baseline, args.device, batch)
            if args.told_the_source:  # what edit_damage_rel measures of each image: the bare components and its own
                scorers["told"] = MetricScorer("edit_damage", device=args.device, batch_size=batch)
                scorers["told"].model.colour_edges = True
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
            if args.told_the_source:
                row.update(told_the_source_cpu_s_per_image=best["told"]["cpu"],
                           told_the_source_over_edit_damage_cpu=best["told"]["cpu"] / best["edit_damage"]["cpu"])
                print(f"{size}px batch {batch}: told the source / edit_damage = "
                      f"{row['told_the_source_over_edit_damage_cpu']:.2f} CPU", flush=True)
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
    write_results(args.out, {"command": "python -m bench.detector.bench_edit_damage " + " ".join(argv or sys.argv[1:]),
                             "environment": env, "rows": rows})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
