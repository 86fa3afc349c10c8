"""VisualQuality-R1 on a GPU: images/s and peak memory at 1K and 2K per batch size, and the
projected hours for the release's 28,000 images.

With the real checkpoint at hand (the weights store: BANANA100_WEIGHTS or the Hugging Face cache)
it scores with it and also reports the answers' length and how many parsed. Without it (build
machines have no internet) it builds Qwen2.5-VL-7B's architecture with random weights in bf16:
the cost of a forward pass does not depend on the weights, but a random model never stops
early, so every image generates all `--max-new-tokens` tokens (an upper bound on the time; the
real answer, `<answer>3.52</answer>`, is about 10 tokens). The prompt is then tokenised byte by
byte (banana100/testing/tiny_qwen.py's processor): about 400 text tokens instead of about 80, small next to
the 1,369 (1K) or 5,329 (2K) visual tokens.

    python bench/gpu_vlm_check.py --out bench/results_gpu_vlm_check.json
    python bench/gpu_vlm_check.py --device cpu --tiny          # the plumbing only, on CPU
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from benchtools import REPO, write_results

IMAGES_IN_RELEASE = 28_000
# Qwen2.5-VL-7B-Instruct's config.json (text and vision towers)
TEXT_7B = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=128000,
               rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]}, rope_theta=1000000.0)
VISION_7B = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584,
                 patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                 fullatt_block_indexes=[7, 15, 23, 31], in_channels=3)


def random_7b(processor, dtype):
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    from banana100.testing.tiny_qwen import SPECIALS

    ids = {t: processor.tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    config = Qwen2_5_VLConfig(
        text_config=dict(TEXT_7B, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                         pad_token_id=ids["<|endoftext|>"]),
        vision_config=VISION_7B, image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2_5_VLForConditionalGeneration(config).to(dtype)
    return model.eval()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sides", default="1024,2048")
    ap.add_argument("--batch-sizes", default="1,4,8,16")
    ap.add_argument("--n", type=int, default=16, help="images per measurement")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--tiny", action="store_true", help="the tiny random model (plumbing check, CPU)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results_gpu_vlm_check.json")
    args = ap.parse_args(argv)

    import torch

    from banana100.errors import Banana100Error, WeightsNotFoundError
    from banana100.metrics.vlm import DEFAULT_MAX_PIXELS, VLMScorer, visual_tokens
    from banana100.testing.tiny_qwen import tiny_model, tiny_processor

    cuda = args.device.startswith("cuda")
    model_kind = "tiny random (plumbing only)"
    scorer = None
    if not args.tiny:
        try:
            scorer = VLMScorer(device=args.device, max_new_tokens=args.max_new_tokens)
            model_kind = "TianheWu/VisualQuality-R1-7B (real weights)"
        except WeightsNotFoundError:
            processor = tiny_processor()
            model = random_7b(processor, torch.bfloat16 if cuda else torch.float32)
            scorer = VLMScorer(device=args.device, model=model, processor=processor, max_new_tokens=args.max_new_tokens)
            model_kind = "Qwen2.5-VL-7B architecture, random bf16 weights (generates all max_new_tokens)"
    if scorer is None:
        processor = tiny_processor()
        scorer = VLMScorer(device=args.device, model=tiny_model(processor), processor=processor,
                           max_new_tokens=args.max_new_tokens)
    print(f"model: {model_kind}; device {args.device}; max_pixels {DEFAULT_MAX_PIXELS}", flush=True)
    rng = np.random.default_rng(0)
    rows = []
    for side in [int(s) for s in args.sides.split(",")]:
        images = [rng.integers(0, 256, (side, side, 3), dtype=np.uint8) for _ in range(args.n)]
        for bs in [int(b) for b in args.batch_sizes.split(",")]:
            scorer.batch_size = bs
            scorer.keep_text = True
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            try:
                scorer.score_arrays(images[:bs])  # warm-up: kernels, allocator
            except Banana100Error:
                pass
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter()
            parsed = args.n
            try:
                scorer.score_arrays(images)
            except Banana100Error as e:
                parsed = args.n - len(getattr(e, "errors", {}) or {})
            except torch.cuda.OutOfMemoryError:
                rows.append({"side": side, "batch_size": bs, "oom": True})
                print(f"{side}px batch {bs}: out of memory", flush=True)
                continue
            if cuda:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - t
            ips = args.n / seconds
            peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
            lengths = [len(scorer.processor.tokenizer(t)["input_ids"]) for t in scorer.last_texts if t is not None]
            row = {"side": side, "batch_size": bs, "visual_tokens": visual_tokens(side, side), "images_per_s": round(ips, 3),
                   "peak_gib": None if peak is None else round(peak, 2), "parsed": parsed,
                   "mean_answer_tokens": round(float(np.mean(lengths)), 1) if lengths else None,
                   "hours_for_28000": round(IMAGES_IN_RELEASE / ips / 3600, 2)}
            rows.append(row)
            print(row, flush=True)
    result = {"what": __doc__.splitlines()[0], "model": model_kind, "device": args.device,
              "gpu": torch.cuda.get_device_name(0) if cuda else None, "max_new_tokens": args.max_new_tokens,
              "max_pixels": DEFAULT_MAX_PIXELS, "n": args.n, "when": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}
    write_results(args.out, result)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
