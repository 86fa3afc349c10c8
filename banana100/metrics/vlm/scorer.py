"""VisualQuality-R1 (Wu et al., NeurIPS 2025) as a scorer: Qwen2.5-VL through transformers.

The official code (github.com/TianheWu/VisualQuality-R1) samples (`do_sample=True`), lets
`qwen_vl_utils` size the image (up to 12.8 megapixels) and returns `random.randint(1, 5)` when
the answer does not parse. Here decoding is greedy (the same image always gets the same score),
the prompt is the authors' no-reasoning form ("VisualQuality-R1-Fast"), the image size is pinned
by `max_pixels` (stated in the scores file's `mode` column), and an answer with no score is an
AnswerParseError for that image, never a number.

    scorer = VLMScorer()                      # weights from the weights store
    scorer.score(["a.png", "b.png"])          # -> [3.52, 2.17]
    scorer.measure_images(["a.png"]).texts    # what the model answered, per image (keep_text=True)

Batches are padded on the left (a decoder-only model generates after the last prompt token);
images are batched in order of size so that similar prompts share a batch.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Sequence

import numpy as np

from banana100.errors import AnswerParseError, Banana100Error, ImageReadError
from banana100.imageio import ImageLike, image_size, load_rgb
from banana100.metrics import weights
from banana100.metrics.engine.contract import Scorer, Scores, check_size, image_names
from banana100.metrics.engine.scorer import check_device, is_out_of_memory
from banana100.metrics.table import get_metric
from banana100.metrics.vlm.attention import ATTENTION, set_vision_attention

log = logging.getLogger(__name__)

NAME = "visualquality_r1"

# The authors' prompt and their no-reasoning question template (README, "VisualQuality-R1-Fast").
PROMPT = (
    "You are doing the image quality assessment task. Here is the question: "
    "What is your overall rating on the quality of this picture? The rating should be a float between 1 and 5, "
    "rounded to two decimal places, with 1 representing very poor quality and 5 representing excellent quality."
)
QUESTION = PROMPT + " Output the final answer with only one score in <answer> </answer> tags."

# Qwen2.5-VL's patch (14 px) times its 2x2 merge: sides are rounded to multiples of this.
PATCH = 28
# Largest image area given to the model. 2048 x 2048: the release's 2K images go in at full size,
# so that the static noise the chains accumulate is not averaged away by a downscale; larger
# images are shrunk to this area (about 5,350 visual tokens). The official code's limit
# (qwen_vl_utils: 16384 x 28 x 28 = 12,845,056) lets a 4K image cost 16,000 tokens.
# Token counts and preprocessing cost per setting: bench/vlm/bench_vlm_pixels.py, BENCHMARKS.md.
DEFAULT_MAX_PIXELS = 2048 * 2048
MIN_PIXELS = 4 * PATCH * PATCH  # the processor's and qwen_vl_utils' floor (3,136)
OFFICIAL_MAX_PIXELS = 16384 * PATCH * PATCH
# The answer is "<answer>3.52</answer>" (about 10 tokens); 64 leaves room for a stray space or
# words around it, and bounds the cost of an answer that never closes its tags.
DEFAULT_MAX_NEW_TOKENS = 64
# batch_size=None ("auto"): on CUDA, as many images as fit in MEMORY_SHARE of the free memory by
# `bytes_per_token` x SAFETY (never more than MAX_AUTO_BATCH); on CPU, CPU_AUTO_BATCH.
MEMORY_SHARE, SAFETY, MAX_AUTO_BATCH, CPU_AUTO_BATCH = 0.9, 1.2, 64, 4

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def parse_answer(text: str, low: float = 1.0, high: float = 5.0) -> float:
    """The score in the last `<answer>...</answer>` of `text`, or in `text` when that is only a number.

    Raises ValueError (with the reason) when there is no such number or it lies outside [low, high].
    """
    found = _ANSWER.findall(text)
    answer = found[-1].strip() if found else text.strip()
    numbers = _NUMBER.findall(answer)
    if not found and not (len(numbers) == 1 and numbers[0] == answer):
        raise ValueError("no <answer></answer> tags and not a bare number")
    if not numbers:
        raise ValueError("no number inside <answer></answer>")
    value = float(numbers[0])
    if not (low <= value <= high) or not math.isfinite(value):
        raise ValueError(f"{value} is outside the rating scale {low:g}-{high:g}")
    return value


def messages() -> list[dict]:
    """The chat of one image: the image, then the question (the official message layout)."""
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}]


class VLMScorer(Scorer):
    """Scores images with VisualQuality-R1 (or any Qwen2.5-VL checkpoint given as `model`).

    Args:
        metric: the table entry ("visualquality_r1").
        device: "cpu", "cuda", "cuda:1"; default cuda when available. bf16 on GPU, float32 on CPU.
        batch_size: most images per `generate` call; None: as many as the free memory holds (CUDA,
            see MEMORY_SHARE) or CPU_AUTO_BATCH (CPU). Out of memory, a batch is halved and the
            lower size kept.
        max_pixels: largest image area fed to the model (see DEFAULT_MAX_PIXELS).
        keep_text: return each image's generated text in `Scores.texts` (always kept for failures,
            in the error message).
        max_new_tokens: the most tokens generated per image.
        vision_attention: the vision tower's attention; default all windows of a batch in one SDPA
            call (banana100.metrics.vlm.attention); "sdpa": transformers' loop over windows; None:
            as the model came.

    Raises WeightsNotFoundError naming the Hub repository and folder when the checkpoint is not
    at hand, MissingExtraError when transformers is not installed.
    """

    backend = "transformers"

    def __init__(self, metric: str = NAME, device: str | None = None, batch_size: int | None = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS, keep_text: bool = False,
                 max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, max_image_pixels: int | None = None,
                 model=None, processor=None, vision_attention: str | None = ATTENTION):
        self._setup(metric, device, batch_size, max_pixels, keep_text, max_new_tokens)
        self.max_image_pixels = max_image_pixels
        if model is None:
            from banana100.extras import require_extra

            require_extra(self.spec.extra, f"the {self.spec.display_name} evaluator")
            [(_, folder)] = weights.resolved_files(self.spec.name)
            import torch
            from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

            dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
            model = Qwen2_5_VLForConditionalGeneration.from_pretrained(str(folder), dtype=dtype)
            processor = AutoProcessor.from_pretrained(str(folder))
        self.model = model.to(self.device).eval()
        if vision_attention is not None:
            set_vision_attention(self.model, vision_attention)
        self.processor = processor
        # generation continues after the last prompt token: pad on the left
        self.processor.tokenizer.padding_side = "left"
        self._prompt_tokens: int | None = None

    def _setup(self, metric, device, batch_size, max_pixels, keep_text, max_new_tokens) -> None:
        from banana100.errors import UsageError

        self.spec = get_metric(metric)
        self.device = check_device(device)  # a bad or absent device: one UsageError, as for every metric
        if batch_size is not None and int(batch_size) < 1:
            raise UsageError(f"batch_size must be >= 1, got {batch_size}")
        if int(max_pixels) < MIN_PIXELS:
            raise UsageError(f"max_pixels must be at least {MIN_PIXELS} (2x2 patches of 28 px), got {max_pixels}")
        self.batch_size = None if batch_size is None else int(batch_size)
        self.max_pixels = int(max_pixels)
        self._oom_cap: int | None = None  # the batch size an out-of-memory error left
        self.keep_text, self.max_new_tokens = bool(keep_text), int(max_new_tokens)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def mode(self) -> str:
        """How the scores were made, for the scores file (a resume with other settings is refused)."""
        return f"greedy,no-reasoning,max_pixels={self.max_pixels}"

    @property
    def batchable(self) -> bool:
        return True

    def __repr__(self) -> str:
        return (f"VLMScorer({self.spec.name!r}, device={str(self.device)!r}, batch_size={self.batch_size or 'auto'}, "
                f"max_pixels={self.max_pixels})")

    # --- the scorer contract (banana100.metrics.engine.contract.Scorer) ---
    def measure_images(self, images: Sequence[ImageLike]) -> Scores:
        """`measure` of paths, bytes, PIL images or arrays, in input order.

        Files are checked by their header first (a missing or too small file fails at once) and
        decoded one batch at a time, so memory holds one batch of images, not the whole list.
        """
        images, names, sizes = list(images), image_names(images), []
        for i, img in enumerate(images):
            if isinstance(img, (str, os.PathLike, bytes)):
                sizes.append(image_size(img, self.max_image_pixels))
            else:  # in memory already
                images[i] = load_rgb(img)
                sizes.append(images[i].shape[:2])
            check_size(self.spec, sizes[-1], names[i])
        return self._measure(images, names, sizes)

    def measure(self, arrays: Sequence[np.ndarray], names: Sequence[str], records=None) -> Scores:
        """Scores of HxWx3 uint8 arrays in input order. An answer without a score is an
        AnswerParseError for that image (an `errors` entry), as is an image below the minimum size."""
        return self.measure_large_enough(arrays, names, lambda a, n: self._measure(a, n, [x.shape[:2] for x in a]))

    def _measure(self, images: list, names: list[str], sizes: list) -> Scores:
        failed: dict[int, Banana100Error] = {}
        order = sorted(range(len(images)), key=lambda i: tuple(sizes[i]))  # similar prompts share a batch
        texts: list[str | None] = [None] * len(images)
        for group in self.batches([tuple(sizes[i]) for i in order]):
            idx, arrays = [], []
            for i in (order[g] for g in group):
                try:
                    arrays.append(images[i] if isinstance(images[i], np.ndarray)
                                  else load_rgb(images[i], self.max_image_pixels))
                    idx.append(i)
                except ImageReadError as e:  # corrupt pixel data: that image only
                    failed[i] = e
            if arrays:
                for i, text in zip(idx, self._generate_backing_off(arrays), strict=True):
                    texts[i] = text
        scores: list[float | None] = [None] * len(images)
        for i, text in enumerate(texts):
            if text is None:
                continue
            try:
                scores[i] = parse_answer(text)
            except ValueError as e:
                failed[i] = AnswerParseError(f"{names[i]}: {self.spec.display_name} gave no score ({e}); "
                                             f"it answered {text[:200]!r}")
        return Scores(scores, failed, texts=texts if self.keep_text else None)

    def tokens_per_image(self, height: int, width: int) -> int:
        """Sequence length of one image's generation: visual tokens, the prompt, the answer."""
        if self._prompt_tokens is None:
            text = self.processor.apply_chat_template(messages(), tokenize=False, add_generation_prompt=True,
                                                      add_vision_id=True)
            self._prompt_tokens = len(self.processor.tokenizer(text)["input_ids"])
        return visual_tokens(height, width, self.max_pixels) + self._prompt_tokens + self.max_new_tokens

    @property
    def largest_batch(self) -> int:
        """The most images one `generate` call may take (`banana100 score` hands over at least this
        many a call, so that its chunks do not cap a memory-sized batch)."""
        if self.batch_size is not None:
            return self.batch_size
        return MAX_AUTO_BATCH if self.device.type == "cuda" else CPU_AUTO_BATCH

    def batch_limit(self, tokens: int) -> int:
        """The most images of `tokens` tokens each in one batch: batch_size, the free memory, OOM."""
        cap = self.batch_size
        if cap is None:
            cap = CPU_AUTO_BATCH if self.device.type != "cuda" else min(
                MAX_AUTO_BATCH, max(1, int(free_bytes(self.device) * MEMORY_SHARE
                                           // (tokens * SAFETY * self._bytes_per_token()))))
        return max(1, min(cap, self._oom_cap or cap))

    def _bytes_per_token(self) -> int:
        return bytes_per_token(self.model.config, next(self.model.parameters()).element_size())

    def batches(self, sizes: Sequence[tuple[int, int]]) -> list[list[int]]:
        """Positions in `sizes` (sorted by size) cut into consecutive batches within `batch_limit`."""
        out: list[list[int]] = []
        cur, longest = [], 0
        for k, (h, w) in enumerate(sizes):
            tokens = self.tokens_per_image(h, w)
            if cur and len(cur) + 1 > self.batch_limit(max(longest, tokens)):
                out.append(cur)
                cur, longest = [], 0
            cur.append(k)
            longest = max(longest, tokens)
        return out + [cur] if cur else out

    def _generate_backing_off(self, arrays: list[np.ndarray]) -> list[str]:
        """`generate`; out of memory, the batch in halves (and later batches no larger)."""
        try:
            return self.generate(arrays)
        except Exception as e:  # noqa: BLE001 - only out-of-memory is handled here
            if not is_out_of_memory(e) or len(arrays) == 1:
                raise
        if self.device.type == "cuda":
            import torch

            torch.cuda.empty_cache()
        half = len(arrays) // 2
        if self._oom_cap is None or half < self._oom_cap:
            log.warning("%s: out of memory with %d images a batch; now at most %d",
                        self.spec.display_name, len(arrays), half)
            self._oom_cap = half
        out: list[str] = []
        while len(out) < len(arrays):  # in pieces of the cap, which a piece's own failure may lower
            out += self._generate_backing_off(arrays[len(out) : len(out) + self._oom_cap])
        return out

    def inputs(self, arrays: Sequence[np.ndarray]):
        """The processor's batch for `arrays`: the chat prompt per image, left-padded."""
        from PIL import Image

        chat = messages()
        # add_vision_id: "Picture 1: " before the image, as the official code renders it
        text = self.processor.apply_chat_template(chat, tokenize=False, add_generation_prompt=True, add_vision_id=True)
        images_kwargs = {"min_pixels": MIN_PIXELS, "max_pixels": self.max_pixels}
        if _torch_backend(self.processor):
            # resize and normalise on the scoring device, not as serial host work per image
            # (bench/gpu/gpu_vlm_check.py times both: the "preprocess" rows)
            images_kwargs["device"] = str(self.device)
        return self.processor(text=[text] * len(arrays), images=[Image.fromarray(a) for a in arrays], padding=True,
                              return_tensors="pt", images_kwargs=images_kwargs)

    def generate(self, arrays: Sequence[np.ndarray]) -> list[str]:
        """The model's answer to each image (greedy decoding), one batch."""
        import torch

        batch = self.inputs(arrays).to(self.device)
        with torch.inference_mode():
            out = self.model.generate(**batch, do_sample=False, max_new_tokens=self.max_new_tokens, use_cache=True,
                                      pad_token_id=self.processor.tokenizer.pad_token_id)
        new = out[:, batch["input_ids"].shape[1]:]
        return self.processor.batch_decode(new, skip_special_tokens=True, clean_up_tokenization_spaces=False)


def _torch_backend(processor) -> bool:
    """Whether the processor's image processor is transformers' torch one (it takes a `device`)."""
    try:
        from transformers.image_processing_backends import TorchvisionBackend
    except ImportError:  # transformers before the image-processor backends
        return False
    return isinstance(getattr(processor, "image_processor", None), TorchvisionBackend)


def bytes_per_token(config, itemsize: int) -> int:
    """Peak memory one token of a sequence costs while it is generated: an estimate from the sizes.

    The key/value cache of every language layer, plus the larger of one language layer's
    activations (MLP: 3 x intermediate, ~6 x hidden around it) and one vision block's for the
    merged patches behind a visual token (float32 rotary copies included); `itemsize`: bytes per
    weight (2 in bf16). For Qwen2.5-VL-7B in bf16: 221 kB; issue 31's peaks (batch 16, random
    weights, 24 new tokens, 388 prompt tokens) less the weights' 15.4 GiB come to 210 kB a token
    at 1K and 229 kB at 2K.
    """
    t, v = config.text_config, config.vision_config
    head_dim = getattr(t, "head_dim", None) or t.hidden_size // t.num_attention_heads
    kv = 2 * t.num_hidden_layers * t.num_key_value_heads * head_dim
    text = 3 * t.intermediate_size + 6 * t.hidden_size
    vision = v.spatial_merge_size ** 2 * (3 * v.intermediate_size + 8 * v.hidden_size)
    return (kv + max(text, vision)) * itemsize


def free_bytes(device) -> int:
    """Memory a CUDA device can still give: free on the device plus what torch holds unused."""
    import torch

    free, _ = torch.cuda.mem_get_info(device)
    return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)


def visual_tokens(height: int, width: int, max_pixels: int = DEFAULT_MAX_PIXELS, min_pixels: int = MIN_PIXELS) -> int:
    """Visual tokens Qwen2.5-VL spends on a height x width image (after its smart resize)."""
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    h, w = smart_resize(height, width, factor=PATCH, min_pixels=min_pixels, max_pixels=max_pixels)
    return (h // PATCH) * (w // PATCH)
