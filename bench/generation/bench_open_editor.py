"""Images per minute of the diffusers editor: the same step of several chains batched into one
pipeline call vs one image per call, through the real runner (`generate_chains`).

On CPU with a tiny random FLUX.2 pipeline (banana100/testing/tinypipes.py, built offline), or on a GPU with a
real model (`--model black-forest-labs/FLUX.2-klein-4B`, weights in the local cache). Rounds
alternate batched / one-at-a-time in this one process (same pipeline, same sources), each into a
fresh run folder; the ratio of the medians is the figure to read.

    nice python -m bench.generation.bench_open_editor --chains 4 --steps 3 --size 128 --rounds 3
    python -m bench.generation.bench_open_editor --model black-forest-labs/FLUX.2-klein-4B --size 1024 --gpu-usd-per-hour 3.5
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import sys
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="Hub id or folder (default: the tiny random FLUX.2 pipeline)")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--size", type=int, default=128, help="source side in pixels (square noise images)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--inference-steps", type=int, default=2)
    ap.add_argument("--gpu-usd-per-hour", type=float, default=None, help="price of the GPU, for USD per 1,000 steps")
    ap.add_argument("--out", type=Path, default=RESULTS / "generation" / "open_editor.json")
    args = ap.parse_args()

    import torch

    from banana100.chains.editors import make_editor
    from banana100.chains.runner import generate_chains
    from banana100.imageio import encode_png

    options = {"num_inference_steps": args.inference_steps}
    if args.model:
        options.update(model=args.model)
    else:
        from banana100.testing import tinypipes

        options.update(model="tiny-random-flux2", pipeline=tinypipes.tiny_flux2(), max_sequence_length=64,
                       pipeline_options={"text_encoder_out_layers": (1,)})
    batched = make_editor("diffusers", max_batch=args.chains, **options)
    batched.connect()
    single = make_editor("diffusers", max_batch=1, **{**options, "pipeline": batched._pipe})
    cuda = torch.cuda.is_available() and next(batched._pipe.transformer.parameters()).is_cuda

    with tempfile.TemporaryDirectory() as tmp:
        sources = Path(tmp) / "sources"
        sources.mkdir()
        rng = np.random.default_rng(0)
        for i in range(args.chains):
            img = (rng.random((args.size, args.size, 3)) * 255).astype(np.uint8)
            (sources / f"s{i}.png").write_bytes(encode_png(img))

        def one(editor, concurrency, name):
            if cuda:
                torch.cuda.reset_peak_memory_stats()
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            s = generate_chains(editor, sources, "replicate", steps=args.steps, repeats=1,
                                out_dir=Path(tmp) / f"{name}-{time.perf_counter_ns()}", concurrency=concurrency,
                                progress=False)
            if cuda:
                torch.cuda.synchronize()
            wall = time.perf_counter() - t0
            images = args.chains * args.steps
            assert s.written == images + args.chains
            peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
            return {"wall_s": wall, "images_per_min": 60 * images / wall, "peak_gib": peak}

        one(batched, args.chains, "warmup")  # first call pays lazy initialisation
        rows = {"batched": [], "one_at_a_time": []}
        for _ in range(args.rounds):
            rows["batched"].append(one(batched, args.chains, "batched"))
            rows["one_at_a_time"].append(one(single, 1, "single"))

    med = {k: statistics.median(r["images_per_min"] for r in v) for k, v in rows.items()}
    result = {
        "model": batched.model, "pipeline": batched.kind, "device": "cuda" if cuda else "cpu",
        "machine": platform.processor() or platform.machine(), "torch_threads": torch.get_num_threads(),
        "chains": args.chains, "steps": args.steps, "size": args.size, "inference_steps": args.inference_steps,
        "rounds": rows, "median_images_per_min": med, "ratio_batched_vs_one": med["batched"] / med["one_at_a_time"],
    }
    if cuda:
        result["peak_gib"] = max(r["peak_gib"] for v in rows.values() for r in v)
        result["gpu"] = torch.cuda.get_device_name(0)
    if args.gpu_usd_per_hour is not None:
        result["gpu_usd_per_hour"] = args.gpu_usd_per_hour
        result["usd_per_1000_steps"] = {k: args.gpu_usd_per_hour * 1000 / (60 * v) for k, v in med.items()}
    write_results(args.out, result)
    print(json.dumps({k: result[k] for k in ("pipeline", "device", "median_images_per_min",
                                              "ratio_batched_vs_one")}, indent=2))
    if "usd_per_1000_steps" in result:
        print("USD per 1,000 steps:", result["usd_per_1000_steps"])


if __name__ == "__main__":
    main()
