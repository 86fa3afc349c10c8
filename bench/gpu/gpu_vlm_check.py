"""VisualQuality-R1 on a GPU: the vision tower's batched window attention against transformers'
loop over windows, in one run: images/s, peak memory and hours for 28,000 images at 1K and 2K by
batch size (and the size the free memory gives), how far the two paths' logits and answers differ,
what the vision tower alone costs, host vs device preprocessing, and host syncs per decoded token.

With the real checkpoint at hand (the weights store: BANANA100_WEIGHTS or the Hugging Face cache)
it scores with it. Without it (build machines have no internet) it builds Qwen2.5-VL-7B's
architecture with random bf16 weights directly on the GPU (seconds): the cost of a forward pass
does not depend on the weights, but a random model never stops early, so every image generates
all `--max-new-tokens` tokens (24 by default, as issue 31's baseline; the real answer,
`<answer>3.52</answer>`, is about 10 tokens). The prompt is then tokenised byte by byte
(banana100/testing/tiny_qwen.py's processor): about 400 text tokens instead of about 80, small
next to the 1,369 (1K) or 5,329 (2K) visual tokens.

    python -m bench.gpu.gpu_vlm_check                          # H200: about 2 minutes (--budget-s 120)
    python -m bench.gpu.gpu_vlm_check --tiny                   # the tiny random model on CPU (plumbing)

Paths: "loop" = transformers' SDPA once per window (the default without flash-attn), "batched" =
banana100.metrics.vlm.attention (all windows of a batch in one SDPA call per layer).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, environment, write_results

IMAGES_IN_RELEASE = 28_000
PATHS = {"loop": "sdpa", "batched": None}  # None: vlm_attention.ATTENTION (imported late)


def build(args):
    """(scorer, what the model is) for the arguments."""
    import torch

    from banana100.errors import WeightsNotFoundError
    from banana100.metrics.vlm.scorer import VLMScorer
    from banana100.testing.tiny_qwen import random_7b, tiny_model, tiny_processor

    kw = dict(device=args.device, max_new_tokens=args.max_new_tokens, keep_text=True)
    if args.tiny:
        processor = tiny_processor()
        return VLMScorer(model=tiny_model(processor), processor=processor, **kw), "tiny random (plumbing only)"
    try:
        return VLMScorer(**kw), "TianheWu/VisualQuality-R1-7B (real weights)"
    except WeightsNotFoundError:
        processor = tiny_processor()
        dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
        model = random_7b(processor, dtype, args.device)
        return (VLMScorer(model=model, processor=processor, **kw),
                "Qwen2.5-VL-7B architecture, random bf16 weights (generates all max_new_tokens)")


class Clock:
    """Wall time with the device's queue drained at both ends; peak memory since start."""

    def __init__(self, cuda: bool):
        import torch

        self.torch, self.cuda = torch, cuda

    def __enter__(self):
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats()
        self.t = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.torch.cuda.synchronize()
        self.seconds = time.perf_counter() - self.t
        self.peak_gib = self.torch.cuda.max_memory_allocated() / 2**30 if self.cuda else None


def set_path(scorer, path: str) -> None:
    from banana100.metrics.vlm.attention import ATTENTION, set_vision_attention

    set_vision_attention(scorer.model, PATHS[path] or ATTENTION)


def score(scorer, images):
    """Scores (None where the answer did not parse) and answers of `images`."""

    scored = scorer.measure(images, [f"image {i}" for i in range(len(images))])
    return list(scored.scores), list(scored.texts)


def agreement(scorer, images, cuda: bool) -> dict:
    """Max |difference| between the paths: the vision tower's output and the last token's logits."""
    import torch

    batch = scorer.inputs(images).to(scorer.device)
    out = {}
    for path in PATHS:
        set_path(scorer, path)
        with torch.inference_mode():
            vision = scorer.model.model.visual(batch["pixel_values"], grid_thw=batch["image_grid_thw"])
            logits = scorer.model(**batch, logits_to_keep=1).logits[:, -1]
        out[path] = (vision.pooler_output.float(), logits.float())
    (va, la), (vb, lb) = out.values()
    return {"images": len(images), "vision_max_abs_diff": float((va - vb).abs().max()),
            "vision_max_abs": float(va.abs().max()), "logits_max_abs_diff": float((la - lb).abs().max()),
            "logits_max_abs": float(la.abs().max()),
            "same_next_token": float((la.argmax(-1) == lb.argmax(-1)).float().mean())}


def vision_seconds(scorer, images, cuda: bool) -> dict:
    """The vision tower alone on one batch, per path (issue 31: 66 % of the time at 2K, batch 8)."""
    import torch

    batch = scorer.inputs(images).to(scorer.device)
    row = {"images": len(images)}
    for path in PATHS:
        set_path(scorer, path)
        with torch.inference_mode(), Clock(cuda) as c:
            scorer.model.model.visual(batch["pixel_values"], grid_thw=batch["image_grid_thw"])
        row[f"{path}_s"] = round(c.seconds, 3)
    row["ratio_loop_over_batched"] = round(row["loop_s"] / row["batched_s"], 2)
    return row


def preprocess_seconds(scorer, images, cuda: bool) -> dict:
    """The processor on the host vs on the scoring device (what VLMScorer.inputs does)."""
    import torch

    row = {"images": len(images)}
    device = scorer.device
    for where in (["cpu", "device"] if cuda else ["cpu"]):
        scorer.device = torch.device("cpu") if where == "cpu" else device
        try:
            scorer.inputs(images[:1])  # warm-up
            with Clock(cuda) as c:
                scorer.inputs(images)["pixel_values"].to(device)
        finally:
            scorer.device = device
        row[f"{where}_s_per_image"] = round(c.seconds / len(images), 4)
    return row


def syncs_per_token(scorer, image) -> float | None:
    """Host-device synchronisations per decoded token in `scorer.generate` (CUDA's sync debug mode)."""
    import torch

    counts, steps = [], (2, 10)
    keep = scorer.max_new_tokens
    try:
        for k in steps:
            scorer.max_new_tokens = k
            torch.cuda.synchronize()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                try:
                    scorer.generate([image])
                finally:
                    torch.cuda.set_sync_debug_mode(0)
            counts.append(sum("synchroniz" in str(w.message) for w in caught))
    finally:
        scorer.max_new_tokens = keep
    return (counts[1] - counts[0]) / (steps[1] - steps[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="default cuda; with --tiny, cpu")
    ap.add_argument("--tiny", action="store_true", help="the tiny random model (plumbing check, CPU)")
    ap.add_argument("--sides", default=None, help="image sides (default 2048,1024; --tiny: 448,224)")
    ap.add_argument("--batch-sizes", default="16,auto,8,1", help="'auto': the size the free memory gives")
    ap.add_argument("--paths", default="loop,batched")
    ap.add_argument("--n-small", type=int, default=4, help="images per measurement below this batch size")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--budget-s", type=float, default=120.0,
                    help="measurements that would end past this many seconds are skipped (listed)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    args.device = args.device or ("cpu" if args.tiny else "cuda")

    import torch

    from banana100.metrics.vlm.scorer import DEFAULT_MAX_PIXELS, visual_tokens

    cuda = args.device.startswith("cuda")
    out = args.out or RESULTS / "gpu" / f"gpu_vlm_check_{'cuda' if cuda else 'cpu'}{'_tiny' if args.tiny else ''}.json"
    start = time.perf_counter()
    scorer, model_kind = build(args)
    weights_gib = torch.cuda.memory_allocated() / 2**30 if cuda else None
    setup_s = time.perf_counter() - start
    print(f"model: {model_kind}; device {args.device}; built in {setup_s:.1f} s; "
          f"weights {weights_gib and round(weights_gib, 1)} GiB", flush=True)
    sides = [int(s) for s in (args.sides or ("448,224" if args.tiny else "2048,1024")).split(",")]
    sizes = args.batch_sizes.split(",")
    paths = args.paths.split(",")
    per_token = scorer._bytes_per_token()
    rng = np.random.default_rng(0)
    rows, skipped, extra = [], [], {"agreement": [], "vision": [], "preprocess": []}
    for side in sides:
        tokens = scorer.tokens_per_image(side, side)
        scorer.batch_size = None
        auto = scorer.batch_limit(tokens)
        n_max = max([auto] + [int(b) for b in sizes if b != "auto"] + [args.n_small])
        base = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
        images = [np.roll(base, 7 * k, axis=1) for k in range(n_max)]  # distinct, without drawing 64 2K images
        extra["preprocess"].append({"side": side, **preprocess_seconds(scorer, images[:4], cuda)})
        extra["agreement"].append({"side": side, **agreement(scorer, images[:2], cuda)})
        print(f"{side}px agreement {extra['agreement'][-1]}", flush=True)
        for path in paths:  # warm-up: kernels, allocator
            set_path(scorer, path)
            scorer.batch_size = 1
            score(scorer, images[:1])
        if side == max(sides):
            extra["vision"].append({"side": side, **vision_seconds(scorer, images[:8], cuda)})
            print(f"{side}px vision tower {extra['vision'][-1]}", flush=True)
        texts: dict = {}
        for size in sizes:
            bs = auto if size == "auto" else int(size)
            n = max(bs, args.n_small)
            for path in paths:
                what = {"side": side, "path": path, "batch": size, "batch_size": bs, "images": n}
                if path == "loop" and size == "auto":
                    continue  # the baseline at the sizes issue 31 measured only
                done = [r for r in rows if r["side"] == side and r["path"] == path]
                guess = n / min(r["images_per_s"] for r in done) if done else 0.0
                if time.perf_counter() - start + guess > args.budget_s:
                    skipped.append({**what, "why": f"past --budget-s {args.budget_s:g} (expected {guess:.0f} s)"})
                    print(f"skipped {skipped[-1]}", flush=True)
                    continue
                set_path(scorer, path)
                scorer.batch_size, scorer._oom_cap = bs, None
                with Clock(cuda) as c:
                    scores, answers = score(scorer, images[:n])
                ips = n / c.seconds
                texts[(path, size)] = (scores, answers)
                row = {**what, "visual_tokens": visual_tokens(side, side), "tokens_per_image": tokens,
                       "images_per_s": round(ips, 3), "peak_gib": c.peak_gib and round(c.peak_gib, 2),
                       "bytes_per_token_measured": (round((c.peak_gib - weights_gib) * 2**30 / (bs * tokens))
                                                    if cuda else None),
                       "oom_backed_off_to": scorer._oom_cap,
                       "parsed": sum(s is not None for s in scores),
                       "hours_for_28000": round(IMAGES_IN_RELEASE / ips / 3600, 2)}
                rows.append(row)
                print(row, flush=True)
            pair = [texts.get((p, size)) for p in ("loop", "batched")]
            if all(pair):
                (sa, ta), (sb, tb) = pair
                both = [(a, b) for a, b in zip(sa, sb, strict=True) if a is not None and b is not None]
                extra["agreement"].append({"side": side, "batch": size, "answers_identical": sum(
                    a == b for a, b in zip(ta, tb, strict=True)) / len(ta), "score_max_abs_diff": max(
                    (abs(a - b) for a, b in both), default=None), "both_parsed": len(both)})
    syncs = syncs_per_token(scorer, images[0]) if cuda else None
    gpu = torch.cuda.get_device_name(0) if cuda else None
    result = {"what": __doc__.splitlines()[0], "model": model_kind, "device": args.device, "gpu": gpu,
              "environment": environment(), "max_new_tokens": args.max_new_tokens, "max_pixels": DEFAULT_MAX_PIXELS,
              "setup_s": round(setup_s, 1), "weights_gib": weights_gib and round(weights_gib, 2),
              "bytes_per_token_estimate": per_token, "syncs_per_decoded_token": syncs,
              "wall_s": round(time.perf_counter() - start, 1), "when": time.strftime("%Y-%m-%d %H:%M"),
              "rows": rows, "skipped": skipped, **extra}
    write_results(out, result)
    ratios = {}
    for r in rows:
        ratios.setdefault((r["side"], r["batch"]), {})[r["path"]] = r["images_per_s"]
    for (side, size), v in ratios.items():
        if len(v) == 2:
            print(f"{side}px batch {size}: batched / loop images/s = x{v['batched'] / v['loop']:.2f}")
    print(f"syncs per decoded token: {syncs}; wall {result['wall_s']} s; written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
