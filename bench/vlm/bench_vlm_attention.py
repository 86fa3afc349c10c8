"""Qwen2.5-VL's vision tower on CPU (tiny random model): transformers' loop over windows against
banana100.metrics.vlm.attention's batched windows, side by side in one run.

For one 1024 px image and a batch of four odd-sized images it measures, per path: SDPA calls
(vision tower; and the whole model's forward, language prefill included), the tower's wall and
CPU time (best of --repeats each, the paths alternating), and a torch.profiler breakdown of the tower by operator
(attention, the window permutation's indexing, rotary tables, matrix products) plus the per-image
Python helpers (window index, position ids). The tiny tower (2 layers of width 32) says how
the work is split and how many calls are made, not what a 7B tower costs on a GPU
(bench/gpu/gpu_vlm_check.py).

    python -m bench.vlm.bench_vlm_attention          # bench/results/vlm/vlm_attention.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, environment, write_results

GROUPS = {  # profiler operator (aten::, substring) -> what it is part of; the first match wins
    "attention": ("attention", "softmax", "bmm"),
    "linear / conv": ("addmm", "linear", "conv", "aten::mm"),
    "indexing (window permutation, padding)": ("index", "gather", "scatter", "repeat_interleave", "argsort", "zero_",
                                               "fill_", "arange", "nonzero"),
    "rotary tables": ("aten::cos", "aten::sin"),
    "elementwise and copies (norms, rotary products, casts, residuals)": (
        "mul", "add", "cat", "copy", "neg", "pow", "mean", "rsqrt", "gelu", "silu", "to", "div", "sub"),
}


def group_of(name: str) -> str:
    for group, parts in GROUPS.items():
        if any(p in name for p in parts):
            return group
    return "other"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS / "vlm" / "vlm_attention.json")
    args = ap.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile
    from transformers.vision_utils import get_vision_position_ids, get_vision_window_index

    from banana100.metrics.vlm.scorer import VLMScorer
    from banana100.metrics.vlm.attention import ATTENTION, set_vision_attention
    from banana100.testing.tiny_qwen import tiny_model, tiny_processor

    torch.set_num_threads(args.threads)
    processor = tiny_processor()
    model = tiny_model(processor)
    scorer = VLMScorer(model=model, processor=processor, device="cpu")
    visual = model.model.visual
    rng = np.random.default_rng(0)
    cases = {"one 1024 px image": [(1024, 1024)], "four odd sizes": [(1000, 750), (750, 1000), (610, 930), (930, 610)]}
    paths = {"loop": "sdpa", "batched": ATTENTION}
    real = torch.nn.functional.scaled_dot_product_attention
    rows = []
    for case, sizes in cases.items():
        batch = scorer.inputs([rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes])
        pv, grid = batch["pixel_values"], batch["image_grid_thw"]
        row = {"case": case, "sizes": sizes, "patches": int(pv.shape[0])}
        for path, impl in paths.items():
            set_vision_attention(model, impl)
            for what, args_, kwargs_ in (("tower", (visual, pv), {"grid_thw": grid}), ("forward", (model,), batch)):
                counting = mock.Mock(side_effect=real)
                with torch.no_grad(), mock.patch("torch.nn.functional.scaled_dot_product_attention", counting):
                    args_[0](*args_[1:], **kwargs_)
                row[f"{path}_sdpa_calls_{what}"] = counting.call_count
        best = {(p, clock): float("inf") for p in paths for clock in ("wall", "cpu")}
        with torch.no_grad():
            for _ in range(args.repeats + 1):  # the first round warms up both
                for path, impl in paths.items():
                    set_vision_attention(model, impl)
                    t, c = time.perf_counter(), time.process_time()
                    visual(pv, grid_thw=grid)
                    best[path, "wall"] = min(best[path, "wall"], time.perf_counter() - t)
                    best[path, "cpu"] = min(best[path, "cpu"], time.process_time() - c)
        for clock in ("wall", "cpu"):  # CPU time: steadier than wall time on a loaded machine
            row.update({f"{p}_tower_{clock}_s": round(best[p, clock], 4) for p in paths})
            row[f"tower_{clock}_ratio_loop_over_batched"] = round(best["loop", clock] / best["batched", clock], 2)
        t = time.perf_counter()
        for _ in range(args.repeats):
            get_vision_window_index(grid, visual.spatial_merge_size, visual.window_size, visual.patch_size)
            get_vision_position_ids(grid, visual.spatial_merge_size)
        row["python_helpers_s"] = round((time.perf_counter() - t) / args.repeats, 4)
        for path, impl in paths.items():
            set_vision_attention(model, impl)
            with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
                visual(pv, grid_thw=grid)
            shares: dict[str, float] = {}
            events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
            total = sum(e.self_cpu_time_total for e in events)
            for e in events:
                shares[group_of(e.key)] = shares.get(group_of(e.key), 0.0) + e.self_cpu_time_total / total
            row[f"{path}_profile_shares"] = {k: round(v, 3) for k, v in sorted(shares.items(), key=lambda kv: -kv[1])}
            top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:6]
            row[f"{path}_top_ops"] = {e.key: round(e.self_cpu_time_total / total, 3) for e in top}
        rows.append(row)
        print(row, flush=True)
    result = {"what": __doc__.splitlines()[0], "environment": environment(), "repeats": args.repeats,
              "when": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}
    write_results(args.out, result)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
