"""Does batching chains pay on a real-size open editor, and what does a chain cost?

The denoisers of Qwen-Image-Edit (`QwenImageTransformer2DModel`) and FLUX.2 [dev]
(`Flux2Transformer2DModel`) are built from diffusers' default configs, which are the released sizes
(20.4 B and 32.2 B parameters), with random bf16 weights: nothing is downloaded. One forward is
timed at the shapes of one edit step at `--side` (the target's latent tokens, the reference
image's as many again, and `--text-tokens` prompt tokens), at batch 1 and batch 4.

From the forward time: an edit step = forwards per denoising step (2 where banana100's editor
runs true CFG: Qwen-Image-Edit; 1 for the guidance-distilled FLUX.2 [dev]) x denoising steps
(the pipeline's default, read from the installed diffusers, or `--inference-steps`); then a
100-step chain, a Banana100-sized study (28,000 edits) in GPU-hours and USD at
`--gpu-usd-per-hour`, and its wall time on 1, 8 and 64 GPUs (chains are independent: N GPUs
make N chains at once; `generate` under torchrun/accelerate launch). The denoiser only: the text
encoder and VAE run once per edit and are not counted.

    python -m bench.generation.bench_editor_forward --gpu-usd-per-hour 3.50                # on a GPU (~80 GB each)
    python -m bench.generation.bench_editor_forward --tiny --out /tmp/tiny.json            # CPU plumbing check
    python -m bench.generation.bench_editor_forward --forward-s qwen=0.43,flux2=1.11 --inference-steps 50,40,8,4 \\
        --gpu-usd-per-hour 3.50 --out bench/results/generation/editor_cost_h200.json  # cost out forward times measured elsewhere
"""

from __future__ import annotations

import argparse
import inspect
import json
import time

import sys
from pathlib import Path
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, environment, write_results

CHAIN_STEPS = 100
STUDY_EDITS = 28_000  # Banana100: 280 chains x 100 steps
GPUS = (1, 8, 64)
# name -> (label, transformer class, pipeline class, forwards per denoising step in banana100's editor,
#          toy config for --tiny)
MODELS = {
    "qwen": ("Qwen-Image-Edit-2509/2511 transformer", "QwenImageTransformer2DModel", "QwenImageEditPlusPipeline", 2,
             {"num_layers": 1, "num_attention_heads": 2, "joint_attention_dim": 64}),
    "flux2": ("FLUX.2 [dev] transformer", "Flux2Transformer2DModel", "Flux2Pipeline", 1,
              {"num_layers": 1, "num_single_layers": 1, "num_attention_heads": 2, "joint_attention_dim": 64}),
}


def default_steps(pipeline: str) -> int:
    """The pipeline's default `num_inference_steps`, from the installed diffusers' own signature."""
    import diffusers

    return inspect.signature(getattr(diffusers, pipeline).__call__).parameters["num_inference_steps"].default


def inputs(name: str, model, batch: int, side: int, text: int, device):
    """Random inputs of one edit step: target and reference latents, prompt embeddings."""
    import torch

    lat = side // 16  # VAE /8, then 2x2 patches: latent tokens per side
    n = lat * lat
    bf = dict(device=device, dtype=torch.bfloat16)
    cond = torch.randn(batch, text, model.config.joint_attention_dim, **bf)
    t = torch.full((batch,), 0.5, **bf)
    if name == "qwen":
        return dict(hidden_states=torch.randn(batch, 2 * n, model.config.in_channels, **bf),
                    encoder_hidden_states=cond,
                    encoder_hidden_states_mask=torch.ones(batch, text, device=device, dtype=torch.long),
                    timestep=t, img_shapes=[[(1, lat, lat), (1, lat, lat)]] * batch, return_dict=False)
    grid = torch.stack(torch.meshgrid(torch.arange(lat), torch.arange(lat), indexing="ij"), -1).reshape(n, 2)
    img_ids = torch.zeros(2 * n, 4)
    img_ids[:, 2:] = torch.cat([grid, grid])
    img_ids[n:, 0] = 10  # the reference image sits at its own time offset, as Flux2Pipeline places it
    txt_ids = torch.zeros(text, 4)
    txt_ids[:, 3] = torch.arange(text)
    return dict(hidden_states=torch.randn(batch, 2 * n, model.config.in_channels, **bf), encoder_hidden_states=cond,
                timestep=t, img_ids=img_ids.to(device)[None].expand(batch, -1, -1),
                txt_ids=txt_ids.to(device)[None].expand(batch, -1, -1),
                guidance=torch.full((batch,), 4.0, **bf), return_dict=False)


def time_forward(name: str, side: int, text: int, device: str, tiny: bool, repeats: int) -> dict:
    import diffusers
    import torch

    label, cls, _, _, toy = MODELS[name]
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = getattr(diffusers, cls)(**(toy if tiny else {})).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    params = sum(p.numel() for p in model.parameters())
    out = {"model": label + (" (toy config)" if tiny else ""), "params_b": round(params / 1e9, 3),
           "side": side, "tokens": 2 * (side // 16) ** 2 + text}

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    for batch in (1, 4):
        kw = inputs(name, model, batch, side, text, device)
        with torch.no_grad():
            model(**kw)  # warm-up
            sync()
            t0 = time.perf_counter()
            for _ in range(repeats):
                model(**kw)
            sync()
        out[f"s_per_forward_b{batch}"] = (time.perf_counter() - t0) / repeats
    out["per_image_gain_b4"] = out["s_per_forward_b1"] / (out["s_per_forward_b4"] / 4)
    if device.startswith("cuda"):
        out["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        torch.cuda.reset_peak_memory_stats()
    del model
    return out


def costs(name: str, forward_s: float, steps: int | None, usd_per_hour: float | None) -> dict:
    _, _, pipeline, forwards, _ = MODELS[name]
    n = steps or default_steps(pipeline)
    edit_s = forward_s * forwards * n
    study_h = edit_s * STUDY_EDITS / 3600
    out = {"pipeline": pipeline, "inference_steps": n, "inference_steps_source": "given" if steps else
           "the pipeline's default in the installed diffusers", "forwards_per_denoising_step": forwards,
           "s_per_edit_step": edit_s, "h_per_100_step_chain": edit_s * CHAIN_STEPS / 3600,
           "gpu_hours_28000_edits": study_h, "wall_h_28000_edits_on": {str(g): study_h / g for g in GPUS}}
    if usd_per_hour is not None:
        out.update(gpu_usd_per_hour=usd_per_hour, usd_per_100_step_chain=usd_per_hour * edit_s * CHAIN_STEPS / 3600,
                   usd_28000_edits=usd_per_hour * study_h)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="qwen,flux2", help=f"comma-separated: {', '.join(MODELS)}")
    ap.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--tiny", action="store_true", help="toy configs (a CPU check of the plumbing, not a figure)")
    ap.add_argument("--side", type=int, default=None, help="image side in pixels (default 1024; 256 with --tiny)")
    ap.add_argument("--text-tokens", type=int, default=None, help="prompt tokens (default 512; 64 with --tiny)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--inference-steps", default=None,
                    help="comma-separated denoising step counts to cost out (default: each pipeline's own default)")
    ap.add_argument("--forward-s", default=None, help="name=seconds,...: batch-1 forward times measured elsewhere; "
                                                      "nothing is timed")
    ap.add_argument("--gpu-usd-per-hour", type=float, default=None, help="price of one GPU-hour (state it)")
    ap.add_argument("--out", default=str(RESULTS / "generation" / "editor_forward.json"))
    args = ap.parse_args()

    names = [m.strip() for m in args.models.split(",") if m.strip()]
    given = dict((k, float(v)) for k, v in (p.split("=") for p in args.forward_s.split(","))) if args.forward_s else {}
    rows = []
    for name in (list(given) if given else names):
        if given:
            row = {"model": MODELS[name][0], "s_per_forward_b1": given[name], "forward_s_source": "given"}
        else:
            import torch

            device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
            row = time_forward(name, args.side or (256 if args.tiny else 1024),
                               args.text_tokens or (64 if args.tiny else 512), device, args.tiny, args.repeats)
            row["device"] = torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"
        for steps in [int(n) for n in args.inference_steps.split(",")] if args.inference_steps else [None]:
            rows.append({**row, **costs(name, row["s_per_forward_b1"], steps, args.gpu_usd_per_hour)})
            print(json.dumps(rows[-1]), flush=True)
    import diffusers

    write_results(args.out, {"environment": environment(), "diffusers": diffusers.__version__, "tiny": args.tiny,
                             "rows": rows})


if __name__ == "__main__":
    main()
