"""Does batching chains pay on a real-size open editor? The denoiser's forward pass at one edit
step's shapes (target + reference latents + prompt tokens), batch 1 against batch B, with random
bf16 weights at the real sizes (the cost of a forward does not depend on the weights).

    python bench/gpu_editor_batching.py --out bench/results_gpu_editor_batching.json   # on a GPU
    python bench/gpu_editor_batching.py --tiny --device cpu                           # plumbing only

Models: Qwen-Image-Edit's transformer (diffusers' QwenImageTransformer2DModel defaults: the 20 B
MMDiT) and FLUX.2 [dev]'s (Flux2Transformer2DModel defaults: 32 B). With `--tiny` each gets a
one-layer toy config, for a CPU check that the script runs. The price of an edit step follows:
forwards x inference steps (x2 with true CFG), which docs/open-editors.md turns into cost.
"""

from __future__ import annotations

import argparse
import time

from benchtools import environment, results_path, write_results


def _sync(dev: str) -> None:
    import torch

    if dev.startswith("cuda"):
        torch.cuda.synchronize()


def _time_forward(model, inputs, reps: int, dev: str) -> float:
    import torch

    with torch.no_grad():
        model(**inputs)  # warm-up: kernels, allocator
        _sync(dev)
        t = time.perf_counter()
        for _ in range(reps):
            model(**inputs)
        _sync(dev)
    return (time.perf_counter() - t) / reps


def _build(cls, config: dict, dev: str):
    """The model with random weights, made directly on `dev` in bf16 (seconds on a GPU, no CPU init)."""
    import torch

    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(dev):
            return cls(**config).eval()
    finally:
        torch.set_default_dtype(torch.float32)


def qwen(dev: str, side: int, text_tokens: int, tiny: bool):
    import torch
    from diffusers import QwenImageTransformer2DModel

    model = _build(QwenImageTransformer2DModel,
                   dict(num_layers=1, num_attention_heads=2, joint_attention_dim=64) if tiny else {}, dev)
    lat = side // 16  # VAE /8, then 2x2 patches: tokens per side
    jd = model.config.joint_attention_dim

    def inputs(b: int) -> dict:
        return dict(hidden_states=torch.randn(b, 2 * lat * lat, 64, device=dev, dtype=torch.bfloat16),
                    encoder_hidden_states=torch.randn(b, text_tokens, jd, device=dev, dtype=torch.bfloat16),
                    encoder_hidden_states_mask=torch.ones(b, text_tokens, device=dev, dtype=torch.long),
                    timestep=torch.full((b,), 0.5, device=dev, dtype=torch.bfloat16),
                    img_shapes=[[(1, lat, lat), (1, lat, lat)]] * b, return_dict=False)

    return "Qwen-Image-Edit transformer", model, inputs, 2 * lat * lat + text_tokens


def flux2(dev: str, side: int, text_tokens: int, tiny: bool):
    import torch
    from diffusers import Flux2Transformer2DModel

    model = _build(Flux2Transformer2DModel, dict(num_layers=1, num_single_layers=1, num_attention_heads=2,
                                                 joint_attention_dim=64) if tiny else {}, dev)
    lat = side // 16  # VAE /8, then 2x2 packing
    n = lat * lat
    jd = model.config.joint_attention_dim
    ids = torch.zeros(2 * n, 4, device=dev)
    yy, xx = torch.meshgrid(torch.arange(lat, device=dev), torch.arange(lat, device=dev), indexing="ij")
    ids[:n, 2], ids[:n, 3] = yy.flatten(), xx.flatten()
    ids[n:, 0] = 10  # the reference image sits at another time offset
    ids[n:, 2], ids[n:, 3] = yy.flatten(), xx.flatten()
    txt_ids = torch.zeros(text_tokens, 4, device=dev)
    txt_ids[:, 3] = torch.arange(text_tokens, device=dev)

    def inputs(b: int) -> dict:
        return dict(hidden_states=torch.randn(b, 2 * n, model.config.in_channels, device=dev, dtype=torch.bfloat16),
                    encoder_hidden_states=torch.randn(b, text_tokens, jd, device=dev, dtype=torch.bfloat16),
                    timestep=torch.full((b,), 0.5, device=dev, dtype=torch.bfloat16),
                    img_ids=ids[None].expand(b, -1, -1), txt_ids=txt_ids[None].expand(b, -1, -1),
                    guidance=torch.full((b,), 4.0, device=dev, dtype=torch.bfloat16), return_dict=False)

    return "FLUX.2 [dev] transformer", model, inputs, 2 * n + text_tokens


MODELS = {"qwen": qwen, "flux2": flux2}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default="qwen,flux2")
    ap.add_argument("--tiny", action="store_true", help="one-layer toy configs (CPU plumbing check)")
    ap.add_argument("--side", type=int, default=None, help="image side in px (default 1024; 256 with --tiny)")
    ap.add_argument("--text-tokens", type=int, default=None, help="prompt tokens (default 512; 64 with --tiny)")
    ap.add_argument("--batch", type=int, default=4, help="the batched size compared with batch 1")
    ap.add_argument("--reps", type=int, default=None, help="timed forwards per batch size (default 3; 1 with --tiny)")
    ap.add_argument("--out", default=None, help="results JSON (default bench/results_gpu_editor_batching.json)")
    args = ap.parse_args(argv)

    import torch

    side = args.side or (256 if args.tiny else 1024)
    text_tokens = args.text_tokens or (64 if args.tiny else 512)
    reps = args.reps or (1 if args.tiny else 3)
    cuda = args.device.startswith("cuda")
    torch.manual_seed(0)
    rows = []
    results = {"environment": environment(), "device": torch.cuda.get_device_name(0) if cuda else "cpu",
               "tiny": args.tiny, "side": side, "text_tokens": text_tokens, "rows": rows}
    out = args.out or results_path(__file__, "_tiny" if args.tiny else "")
    for key in args.models.split(","):
        t0 = time.perf_counter()
        name, model, inputs, tokens = MODELS[key](args.device, side, text_tokens, args.tiny)
        build_s = time.perf_counter() - t0
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        one = _time_forward(model, inputs(1), reps, args.device)
        many = _time_forward(model, inputs(args.batch), reps, args.device)
        row = {"model": name + (" (tiny)" if args.tiny else ""),
               "params_b": round(sum(p.numel() for p in model.parameters()) / 1e9, 3), "tokens": tokens,
               "build_s": round(build_s, 1), "s_per_forward_b1": round(one, 4),
               f"s_per_forward_b{args.batch}": round(many, 4),
               f"per_image_gain_b{args.batch}": round(one / (many / args.batch), 3),
               "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1) if cuda else None}
        rows.append(row)
        print(row, flush=True)
        write_results(out, results)  # after each model: a later one running out of time loses nothing
        del model
        if cuda:
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
