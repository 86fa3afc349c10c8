"""`banana100 generate`: make degradation chains."""

from __future__ import annotations

from pathlib import Path

from banana100.cli.common import command, COUNT, NON_NEGATIVE, POSITIVE, POSITIVE_INT
from banana100.errors import UsageError
from banana100.chains.editors import gemini, service  # their defaults are the options' defaults


def add_parser(sub) -> None:
    g = command(sub, "generate", "make degradation chains (resumable: rerun the same command)")
    g.add_argument(
        "--editor", default="simulated",
        help="editor: simulated (offline model of the effect), gemini (Nano Banana), openai (GPT Image), xai (Grok "
             "Imagine), bfl (FLUX.2 [pro]/[max]), diffusers (an open editor on your own GPU: FLUX.2 [dev], "
             "Qwen-Image-Edit; docs/open-editors.md), an installed package's editor, or your own class: "
             "path/to/file.py:Class or package.module:Class (docs/own-editor.md). Every family: docs/editors.md"
    )
    g.add_argument(
        "--model",
        default=None,
        help=f"gemini model id: {gemini.DEFAULT_MODEL} (Nano Banana Pro, the default) or "
        f"{gemini.FAST_MODEL} (Nano Banana 2, fast); openai, xai, bfl: the service's model id (defaults in "
        "docs/editors.md); diffusers: a Hub id or local pipeline folder (required)",
    )
    g.add_argument(
        "--base-url", default=None,
        help="gemini, openai, xai, bfl: API base URL (default: the service's; gemini also reads "
             "$GOOGLE_GEMINI_BASE_URL)"
    )
    g.add_argument("--quality", default=None, choices=("low", "medium", "high"),
                   help="openai: image quality (default medium); fixed for the run folder, like --model")
    g.add_argument("--sources", required=True, type=Path, help="folder of source images (required)")
    g.add_argument("--setting", default="replicate", help="setting name from generation/settings.yaml")
    g.add_argument("--steps", type=POSITIVE_INT, default=100, help="edit steps per chain")
    g.add_argument("--repeats", type=POSITIVE_INT, default=1, help="chains per source image")
    g.add_argument("--concurrency", type=POSITIVE_INT, default=4, help="chains run at once")
    g.add_argument("--seed", type=int, default=0, help="base seed (each chain and step derives its own)")
    g.add_argument("--out", required=True, type=Path, help="run folder (required)")
    g.add_argument("--max-cost", type=NON_NEGATIVE, default=None,
                   help="USD cap on the estimated spend of the run folder; stops cleanly (default: no cap)")
    g.add_argument("--rpm", type=POSITIVE, default=None,
                   help="client-side rate limit, requests per minute, all chains (default: no limit)")
    g.add_argument("--dry-run", action="store_true", help="show chains, steps, cost estimate and prompts; call nothing")
    g.add_argument("--retry-stopped", action="store_true", help="retry chains the editor stopped (safety blocks)")
    g.add_argument("--chat", default="different", metavar="different|same",
                   help="different: a fresh request per step (the paper's protocol); same: one conversation per "
                   "chain, each request resends the earlier turns (gemini, openai); 'different,same' makes both")
    g.add_argument("--timeout", type=POSITIVE, default=service.TIMEOUT_S, help="service editors: seconds per request before retrying")
    g.add_argument("--max-attempts", type=POSITIVE_INT, default=service.MAX_ATTEMPTS,
                   help="service editors: calls per step on transient faults")
    g.add_argument("--safety-retries", type=COUNT, default=service.SAFETY_RETRIES,
                   help="service editors: new-seed retries after safety blocks")
    g.add_argument("--device", default=None, help="diffusers: cpu, cuda, cuda:N (default: cuda when available)")
    g.add_argument("--dtype", default=None, help="diffusers: bfloat16 (default on GPU) or float32 (default on CPU)")
    g.add_argument("--cpu-offload", action="store_true",
                   help="diffusers: model CPU offload (each model on the GPU only while it runs; less memory, slower)")
    g.add_argument("--vae-tiling", action="store_true", help="diffusers: decode in tiles (large images in less memory)")
    g.add_argument("--size", choices=("source", "native"), default="source",
                   help="diffusers: output size: keep the source's (rounded down to a multiple of 16) or the "
                        "model's native ~1 MP at the source's aspect ratio")
    g.add_argument("--batch-size", type=POSITIVE_INT, default=1,
                   help="diffusers: most chains' images per pipeline call (default 1). FLUX.2 pipelines batch "
                        "the same step of several chains, at most --concurrency (Qwen-Image-Edit and Kontext take "
                        "1). At real sizes a GPU gains nothing per image (H200, batch 4: x1.00 for FLUX.2 [dev]'s "
                        "denoiser, x1.02 for Qwen-Image-Edit's; docs/open-editors.md): use more GPUs (torchrun) "
                        "instead. A batched chain is reproducible only up to float rounding")
    g.add_argument("--inference-steps", type=POSITIVE_INT, default=None,
                   help="diffusers: denoising steps per edit (default: the pipeline's, 50 for FLUX.2 and "
                        "Qwen-Image-Edit; 4 for step-distilled models, docs/open-editors.md); fixed for the run "
                        "folder, like --model and --seed: a resume must give the same (or leave it out again)")
    g.add_argument("--guidance", type=NON_NEGATIVE, default=None,
                   help="diffusers: guidance scale (default: the pipeline's); fixed for the run folder, as "
                        "--inference-steps")
    g.set_defaults(func=run)


API_EDITORS = ("gemini", "openai", "xai", "bfl")  # service editors: a key, a base URL, retries


def editor_options(args) -> dict:
    """The constructor options of `--editor` from the command line; an option that does not
    apply to that editor is refused with one line."""
    key = args.editor.strip().lower()
    if key != "openai" and args.quality is not None:
        raise UsageError(f"--quality applies to the openai editor, not {args.editor!r}")
    if key in API_EDITORS:
        options = {"base_url": args.base_url, "timeout_s": args.timeout, "max_attempts": args.max_attempts,
                   "safety_retries": args.safety_retries}
        if args.model:  # else the editor's default model
            options["model"] = args.model
        if args.quality is not None:
            options["quality"] = args.quality
        return options
    if args.base_url:
        raise UsageError(f"--base-url applies to the service editors ({', '.join(API_EDITORS)}), not {args.editor!r}")
    if key == "diffusers":
        return {
            "model": args.model, "device": args.device, "dtype": args.dtype, "cpu_offload": args.cpu_offload,
            "vae_tiling": args.vae_tiling, "size": args.size, "max_batch": args.batch_size,
            "num_inference_steps": args.inference_steps, "guidance_scale": args.guidance,
        }
    if args.model:
        if key == "simulated":
            raise UsageError("--model applies to the service editors and diffusers, not 'simulated'")
        return {"model": args.model}  # your own editor (or an installed one) takes it, or says it does not
    return {}


def run(args) -> None:
    from banana100.chains.editors import make_editor
    from banana100.chains.runner import generate_chains

    editor = make_editor(args.editor, **editor_options(args))
    summary = generate_chains(
        editor,
        sources=args.sources,
        setting=args.setting,
        steps=args.steps,
        repeats=args.repeats,
        out_dir=args.out,
        concurrency=args.concurrency,
        seed=args.seed,
        max_cost=args.max_cost,
        rpm=args.rpm,
        dry_run=args.dry_run,
        retry_stopped=args.retry_stopped,
        chat=args.chat,
    )
    print(summary)
