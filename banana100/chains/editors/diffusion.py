"""The open editor: any diffusers image-editing pipeline on your own GPU (or CPU).

`banana100 generate --editor diffusers --model <Hub id or local folder>`. Known pipelines, with
their traps handled:

- `Flux2Pipeline` (FLUX.2 [dev]) and `Flux2KleinPipeline` (FLUX.2 [klein]): batched across
  chains. The public call takes one list of reference images shared by every prompt, so a batch
  of different chains' images is fed by giving each sample its own image latents (see
  `_flux2_batch`).
- `QwenImageEditPlusPipeline` (Qwen-Image-Edit-2509/2511): its call refuses more than one prompt
  (diffusers 0.42), so it runs one image per call. It resizes every input to the module constants
  `VAE_IMAGE_SIZE` (about 1 MP) and `CONDITION_IMAGE_SIZE` (384x384, for the vision encoder)
  whatever the output size; the editor sets `VAE_IMAGE_SIZE` to the output's area for each call so
  that the VAE sees the image at the size it makes (a 2K source is not squeezed to 1 MP and back).
- `FluxKontextPipeline`: called with `_auto_resize=False` and `max_area` = the output's area
  (otherwise it resizes to about 1 MP whatever is asked).

Output size policy (`size`): "source" keeps the input's size, rounded down to a multiple of 16
(the pipelines' latent grid), so a chain keeps its source's size after step 1; "native" makes
images of about `native_area` pixels (1 MP, the models' training size) at the input's aspect
ratio. A setting's `image_size` (1K/2K/4K) overrides both. The seed of each request seeds its
own CPU `torch.Generator`, so a chain's noise does not depend on which chains share its batch (its
image does, by float rounding in the batched products only: a pixel level now and then).
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import numpy as np

from banana100.chains.editors.base import FREE, Editor, EditRequest, EditResult
from banana100.errors import RunStopped, UsageError, WeightsNotFoundError

SIZE_POLICIES = ("source", "native")
NATIVE_AREA = 1024 * 1024
MULTIPLE = 16  # the pipelines' latent grid: VAE factor 8 x 2x2 patches
# Setting `image_size` -> output area (the Gemini service's 1K/2K/4K, squared).
IMAGE_SIZE_AREA = {"1K": 1024 * 1024, "2K": 2048 * 2048, "4K": 4096 * 4096}
# Setting config keys this editor honours; others (temperature, aspect_ratio) are refused.
CONFIG_KEYS = frozenset({"image_size", "num_inference_steps", "guidance_scale", "true_cfg_scale",
                         "negative_prompt"})
BATCHED = ("Flux2Pipeline", "Flux2KleinPipeline")

# One pipeline per (model, device, dtype, offload) per process: the runner, the Space and the
# tests reuse it instead of loading gigabytes again.
_PIPELINES: dict[tuple, object] = {}
_PIPELINES_LOCK = threading.Lock()


def output_size(width: int, height: int, policy: str = "source", area: int | None = None) -> tuple[int, int]:
    """(width, height) of the next image for an input of `width` x `height`.

    `area` (pixels) wins when given; else "source" keeps the input's size and "native" takes
    NATIVE_AREA; either way at the input's aspect ratio, rounded down to a multiple of 16 (at least 64,
    the smallest input FLUX.2 takes)."""
    if policy not in SIZE_POLICIES:
        raise UsageError(f"unknown output size policy {policy!r}; known: {', '.join(SIZE_POLICIES)}")
    if area is None and policy == "source":
        w, h = width, height
    else:
        target = area or NATIVE_AREA
        scale = math.sqrt(target / (width * height))
        w, h = width * scale, height * scale
    return max(64, int(w) // MULTIPLE * MULTIPLE), max(64, int(h) // MULTIPLE * MULTIPLE)


class DiffusersEditor(Editor):
    """An image-editing diffusers pipeline, loaded once per process (see the module docstring).

    `model`: a Hub id or a local folder (`DiffusionPipeline.from_pretrained`); `pipeline`: an
    already built pipeline (tests, the Space), then `model` only names it. `device`: "cuda",
    "cpu", ... (default: cuda when available); `dtype`: "bfloat16" (default on GPU) or "float32"
    (default on CPU). `cpu_offload` (model CPU offload, needs accelerate) and `vae_tiling` save GPU
    memory. `max_batch`: the most chains' images per pipeline call (default 1: batching does not pay
    at real sizes on a GPU, docs/open-editors.md; pipelines that take one image per call stay at 1).
    """

    name = "diffusers"
    price = FREE
    option_flags: ClassVar[dict[str, str]] = {"num_inference_steps": "--inference-steps",
                                              "guidance_scale": "--guidance", "size_policy": "--size",
                                              "dtype": "--dtype"}

    def __init__(self, model: str | None = None, pipeline=None, device: str | None = None, dtype: str | None = None,
                 cpu_offload: bool = False, vae_tiling: bool = False, size: str = "source",
                 native_area: int = NATIVE_AREA, max_batch: int = 1, num_inference_steps: int | None = None,
                 guidance_scale: float | None = None, max_sequence_length: int | None = None,
                 pipeline_options: dict | None = None):
        if pipeline is None and not model:
            raise UsageError("the diffusers editor needs --model: a Hub id (e.g. Qwen/Qwen-Image-Edit-2511) "
                             "or a local folder holding a diffusers pipeline")
        if size not in SIZE_POLICIES:
            raise UsageError(f"unknown --size {size!r}; known: {', '.join(SIZE_POLICIES)}")
        if int(max_batch) < 1:
            raise UsageError(f"--batch-size must be at least 1, got {max_batch}")
        self.model = str(model) if model else type(pipeline).__name__
        self._pipe = pipeline
        self.device = device
        self.dtype = dtype
        self.cpu_offload = bool(cpu_offload)
        self.vae_tiling = bool(vae_tiling)
        self.size = size
        self.native_area = int(native_area)
        self.max_batch = int(max_batch)
        self.num_inference_steps = num_inference_steps
        self.guidance_scale = guidance_scale
        self.max_sequence_length = max_sequence_length
        self.pipeline_options = dict(pipeline_options or {})  # extra keyword arguments of every call
        self._call_lock = threading.Lock()  # one pipeline call at a time (and the module constants below)
        if pipeline is not None:
            self._adopt(pipeline)

    def fixed_options(self) -> dict:
        """Denoising steps, guidance scale (None: the pipeline's default), the output size policy
        (--size) and the dtype the pipeline runs in (as resolved: a resume on another device would
        otherwise switch bfloat16 and float32 silently): fixed for a run folder, as each changes
        every image."""
        steps, guidance = self.num_inference_steps, self.guidance_scale
        if self._pipe is not None:
            dtype = getattr(self._pipe, "dtype", None)
            dtype = None if dtype is None else str(dtype).removeprefix("torch.")
        else:
            dtype = resolve_dtype(self.device, self.dtype)
        return {"num_inference_steps": None if steps is None else int(steps),
                "guidance_scale": None if guidance is None else float(guidance), "size_policy": self.size,
                "dtype": dtype}

    # -- loading ---------------------------------------------------------------------------------

    def connect(self):
        """Load the pipeline now (once per process), before any file is written."""
        if self._pipe is None:
            self._adopt(load_pipeline(self.model, self.device, self.dtype, self.cpu_offload, self.vae_tiling))
        return self._pipe

    def _adopt(self, pipe) -> None:
        self._pipe = pipe
        self.kind = type(pipe).__name__
        if self.kind not in BATCHED:
            self.max_batch = 1  # e.g. QwenImageEditPlusPipeline refuses several prompts per call
        if self.vae_tiling and getattr(pipe, "vae", None) is not None and hasattr(pipe.vae, "enable_tiling"):
            pipe.vae.enable_tiling()
        if hasattr(pipe, "set_progress_bar_config"):
            pipe.set_progress_bar_config(disable=True)

    # -- the Editor contract ---------------------------------------------------------------------

    def check_config(self, config: dict) -> None:
        unknown = sorted(set(config or {}) - CONFIG_KEYS)
        if unknown:
            raise UsageError(f"the diffusers editor cannot honour the setting config keys {unknown} "
                             f"(it honours {sorted(CONFIG_KEYS)}; sampling temperature is a language-model option)")
        size = (config or {}).get("image_size")
        if size is not None and str(size) not in IMAGE_SIZE_AREA:
            raise UsageError(f"image_size {size!r} is not one of {sorted(IMAGE_SIZE_AREA)}")

    def request_config(self, config: dict, seed: int) -> dict:
        """What one call is given besides the prompt and image (shown by --dry-run)."""
        self.check_config(config)
        out = {"seed": int(seed), "size_policy": self.size}
        if config.get("image_size"):
            out["area"] = IMAGE_SIZE_AREA[str(config["image_size"])]
        elif self.size == "native":
            out["area"] = self.native_area
        for key in ("num_inference_steps", "guidance_scale", "true_cfg_scale", "negative_prompt"):
            value = config.get(key, getattr(self, key, None))
            if value is not None:
                out[key] = value
        return out

    def batch_key(self, request: EditRequest) -> tuple:
        """Requests with the same key can share one pipeline call (same output size and options)."""
        h, w = request.image.shape[:2]
        return (self._size_for(request), tuple(sorted((k, str(v)) for k, v in request.config.items())), w, h)

    def edit(self, request: EditRequest) -> EditResult:
        return self.edit_batch([request])[0]

    def edit_batch(self, requests: list[EditRequest]) -> list[EditResult]:
        """Make the next image of several chains in as few pipeline calls as the pipeline allows."""
        if self._pipe is None:
            self.connect()
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(self.batch_key(r), []).append(i)
        results: list[EditResult | None] = [None] * len(requests)
        for idx in groups.values():
            for start in range(0, len(idx), self.max_batch):
                part = idx[start:start + self.max_batch]
                for i, res in zip(part, self._call([requests[i] for i in part]), strict=True):
                    results[i] = res
        return results  # type: ignore[return-value]

    # -- one pipeline call -----------------------------------------------------------------------

    def _size_for(self, request: EditRequest) -> tuple[int, int]:
        h, w = request.image.shape[:2]
        size = request.config.get("image_size")
        area = IMAGE_SIZE_AREA[str(size)] if size else (self.native_area if self.size == "native" else None)
        return output_size(w, h, self.size, area)

    def _call(self, requests: list[EditRequest]) -> list[EditResult]:
        import torch
        from PIL import Image

        width, height = self._size_for(requests[0])
        config = requests[0].config
        images = [Image.fromarray(np.ascontiguousarray(r.image)) for r in requests]
        images = [im if im.size == (width, height) else im.resize((width, height), Image.Resampling.LANCZOS)
                  for im in images]
        generators = [torch.Generator("cpu").manual_seed(int(r.seed) % (2**63)) for r in requests]
        kwargs = dict(self.pipeline_options)
        kwargs.update(prompt=[r.prompt for r in requests], height=height, width=width, output_type="np",
                      generator=generators)
        for key in ("num_inference_steps", "guidance_scale", "max_sequence_length"):
            value = config.get(key, getattr(self, key, None))
            if value is not None:
                kwargs[key] = value
        if self.kind == "QwenImageEditPlusPipeline":
            kwargs["true_cfg_scale"] = config.get("true_cfg_scale", kwargs.get("true_cfg_scale", 4.0))
            kwargs.setdefault("negative_prompt", config.get("negative_prompt", " "))
            kwargs.pop("guidance_scale", None)  # the 2509/2511 transformers have no guidance embedding
        elif self.kind == "FluxKontextPipeline":
            kwargs.update(_auto_resize=False, max_area=width * height)
        with self._call_lock, self._module_sizes(width * height):
            if self.kind in BATCHED and len(requests) > 1:
                out = _flux2_batch(self._pipe, images, kwargs)
            else:
                out = self._pipe(image=images[0] if len(images) == 1 else images, **kwargs).images
        arrays = np.asarray(out)
        if arrays.ndim == 3:
            arrays = arrays[None]
        info = {"pipeline": self.kind, "width": width, "height": height, "batch": len(requests),
                **{k: v for k, v in kwargs.items() if k in ("num_inference_steps", "guidance_scale", "true_cfg_scale")}}
        for key, value in call_defaults(self._pipe).items():  # what made the image, given or not
            if key not in info and not (key == "guidance_scale" and self.kind == "QwenImageEditPlusPipeline"):
                info[key] = value
        return [EditResult(image=_to_uint8(a), metadata={"editor_info": info})
                for a in arrays[: len(requests)]]

    @contextmanager
    def _module_sizes(self, area: int):
        """QwenImageEditPlusPipeline's VAE input area is a module constant: the output's area for this call."""
        if self.kind != "QwenImageEditPlusPipeline":
            yield
            return
        import diffusers.pipelines.qwenimage.pipeline_qwenimage_edit_plus as qwen_plus

        before = qwen_plus.VAE_IMAGE_SIZE
        qwen_plus.VAE_IMAGE_SIZE = area
        try:
            yield
        finally:
            qwen_plus.VAE_IMAGE_SIZE = before


def _to_uint8(a: np.ndarray) -> np.ndarray:
    return np.clip(np.round(np.asarray(a, dtype=np.float32) * 255.0), 0, 255).astype(np.uint8)


def _flux2_batch(pipe, images, kwargs):
    """One Flux2 call for several chains: each sample gets its own image latents.

    `Flux2Pipeline.__call__` encodes its `image` list as references shared by every prompt. The
    call is given the first image (so that it checks and sizes as usual) while
    `prepare_image_latents` is replaced, for this call only, by one that encodes every chain's image
    on its own and stacks them: the same latents and positions each sample would get alone.
    """
    import torch

    original = pipe.prepare_image_latents
    height, width = kwargs["height"], kwargs["width"]
    tensors = [pipe.image_processor.preprocess(im, height=height, width=width, resize_mode="crop") for im in images]

    def per_sample(images, batch_size, generator, device, dtype):  # noqa: ARG001 - the signature it replaces
        parts = [original(images=[t], batch_size=1, generator=None, device=device, dtype=dtype) for t in tensors]
        return torch.cat([p[0] for p in parts], dim=0), torch.cat([p[1] for p in parts], dim=0)

    pipe.prepare_image_latents = per_sample
    try:
        return pipe(image=[images[0]], **kwargs).images
    finally:
        del pipe.prepare_image_latents  # back to the class's method


def resolve_dtype(device: str | None, dtype: str | None) -> str:
    """The dtype a pipeline is loaded in: `dtype`, else bfloat16 on a GPU and float32 elsewhere."""
    if dtype:
        return dtype
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return "bfloat16" if str(device).startswith("cuda") else "float32"


def load_pipeline(model: str, device: str | None = None, dtype: str | None = None, cpu_offload: bool = False,
                  vae_tiling: bool = False):
    """`DiffusionPipeline.from_pretrained(model)` once per process, with one-line errors."""
    from banana100.extras import require_extra

    require_extra("diffusers", "the diffusers editor")
    import torch
    from diffusers import DiffusionPipeline

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = resolve_dtype(device, dtype)
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise UsageError(f"unknown dtype {dtype!r} (bfloat16, float16 or float32)")
    key = (model, device, dtype, cpu_offload)
    with _PIPELINES_LOCK:
        if key in _PIPELINES:
            return _PIPELINES[key]
        try:
            pipe = DiffusionPipeline.from_pretrained(model, dtype=torch_dtype)
        except (OSError, ValueError, EnvironmentError) as e:
            local = Path(model).exists()
            fix = ("check that the folder holds a diffusers pipeline (model_index.json)" if local else
                   f"download it first (`hf download {model}`, on a machine with internet; gated models need "
                   "`hf auth login` and the licence accepted on the model page) or pass a local folder")
            raise WeightsNotFoundError(f"model {model}: the pipeline could not be loaded "
                                       f"({type(e).__name__}: {str(e).splitlines()[0][:200]}); {fix}") from e
        if cpu_offload:
            if not device.startswith("cuda"):
                raise RunStopped("--cpu-offload needs a GPU (it moves each model to the GPU only while it runs)")
            pipe.enable_model_cpu_offload()
        else:
            pipe.to(device)
        _PIPELINES[key] = pipe
        return pipe


def call_defaults(pipe) -> dict:
    """The pipeline's own defaults of the options a step's record names (`num_inference_steps`,
    `guidance_scale`), from its `__call__` signature: a step made without --inference-steps still
    records how many denoising steps made it."""
    import inspect

    params = inspect.signature(type(pipe).__call__).parameters
    return {k: params[k].default for k in ("num_inference_steps", "guidance_scale")
            if k in params and isinstance(params[k].default, (int, float)) and not isinstance(params[k].default, bool)}

