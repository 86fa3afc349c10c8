"""One step of a chain: the setting's request for step k, the editor's call, the image and record.

The runner (`banana100.chains.runner`) and the Space's live chain (`banana100.explore.
stream_chain`) both make their steps here, so a step is the same wherever it is made: the
setting's prompt for that step, its seed rule (`seed_policy`), its transforms for simulated
editors, and the image the next step sees (the stored PNG, decoded).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass

import numpy as np
from PIL import Image

from banana100.chains.chat import user_parts
from banana100.chains.editors.base import Editor, EditRequest, EditResult
from banana100.chains.manifest import sha256_bytes, utc_now
from banana100.chains.settings import Setting
from banana100.errors import Banana100Error, RunStopped
from banana100.imageio import encode_png, load_rgb
from banana100.schema import FIELD_NAMES, RECORD_FIELDS

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Fields the runner fills; an editor's metadata cannot override them.
_RUNNER_FIELDS = frozenset(
    {
        "chain_id",
        "source_id",
        "setting",
        "repeat",
        "step",
        "image",
        "sha256",
        "parent_sha256",
        "prompt",
        "editor",
        "model",
        "seed",
        "width",
        "height",
        "created_at",
    }
)
_FIELD_TYPES = {"string": (str,), "int32": (int,), "int64": (int,), "float64": (int, float)}
_FIELD_DTYPE = {f.name: f.dtype for f in RECORD_FIELDS}


def step_seed(base_seed: int, chain_id: str, step: int) -> int:
    """The seed of one output step: a hash of (base seed, chain id, step), in [0, 2**63)."""
    digest = hashlib.sha256(f"banana100:{int(base_seed)}:{chain_id}:{int(step)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def chain_seed(setting: Setting, base_seed: int, chain_id: str, step: int) -> int:
    """The seed of output step `step` under the setting's seed policy (`fixed`: step 1's seed)."""
    return step_seed(base_seed, chain_id, 1 if setting.seed_policy == "fixed" else step)


def edit_request(
    setting: Setting, step: int, image: np.ndarray, base_seed: int, chain_id: str,
    image_bytes: bytes | None = None, meter=None, history: list | None = None, source_png: bytes | None = None,
) -> EditRequest:
    """The request for output step `step` of chain `chain_id`, fed `image` (the previous step).
    `history` (a list, empty at step 1) makes it a same-chat request (banana100.chains.chat);
    `source_png` is then the chain's step-0 image, which the first turn carries."""
    prompt = setting.prompt(step)
    return EditRequest(
        image=image,
        prompt=prompt,
        seed=chain_seed(setting, base_seed, chain_id, step),
        config=dict(setting.config),
        simulate=setting.simulate_for(step),
        step=step,
        image_bytes=image_bytes,
        chain_id=chain_id,
        meter=meter,
        history=history,
        user_turn=None if history is None else user_parts(step, prompt, source_png),
    )


@dataclass
class StepOutput:
    data: bytes  # the PNG bytes to store
    rgb: np.ndarray  # the stored image decoded: what the next step sees
    seed: int  # the seed that produced the image (the editor's, when it had to change it)
    fields: dict  # manifest fields from the editor's metadata (see `_metadata_fields`)
    metadata: dict  # the editor's metadata as it returned it
    turn: list | None = None  # same-chat mode: the model's turn, to store (banana100.chains.chat)


def make_step(editor: Editor, request: EditRequest) -> StepOutput:
    """Call the editor once and turn its answer into the image to store and its record fields."""
    t0 = time.perf_counter()
    result = editor.edit(request)
    latency = time.perf_counter() - t0
    _check_result(editor, result)
    data, rgb = _result_image(result)
    seed = result.seed if isinstance(result.seed, int) and not isinstance(result.seed, bool) else request.seed
    metadata = dict(result.metadata or {})
    if request.history is not None and not result.turn:
        raise Banana100Error(f"{type(editor).__name__} returned no conversation turn for a same-chat request")
    return StepOutput(data, rgb, seed, _metadata_fields(metadata, latency), metadata, result.turn)


def _check_result(editor: Editor, result) -> None:
    """Refuse (RunStopped: the same mistake would fail every chain) an answer that is not an
    EditResult with an image of a usable type, naming the editor and what it returned."""
    what = None
    if not isinstance(result, EditResult):
        what = f"{_describe(result)} from edit()"
    elif result.image is not None and not isinstance(result.image, (np.ndarray, Image.Image, bytes)):
        what = f"an EditResult whose image is {_describe(result.image)}"
    elif result.image_bytes is not None and not isinstance(result.image_bytes, (bytes, bytearray)):
        what = f"an EditResult whose image_bytes is {_describe(result.image_bytes)}"
    elif result.metadata is not None and not isinstance(result.metadata, dict):
        what = f"an EditResult whose metadata is {_describe(result.metadata)}"
    if what is not None:
        spec = getattr(editor, "editor_spec", None) or editor.name
        raise RunStopped(f"the editor {spec} returned {what}; edit() must return "
                         "banana100.chains.editors.EditResult(image=an HxWx3 uint8 array or PIL image, metadata=dict) "
                         "(docs/own-editor.md)")


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"a bare ndarray ({value.dtype} {tuple(value.shape)})"
    text = " ".join(repr(value).split())
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


def _result_image(result: EditResult) -> tuple[bytes, np.ndarray]:
    """(PNG bytes to store, RGB array the next step sees = the stored image decoded)."""
    raw = result.image_bytes
    if raw is not None and bytes(raw[:8]) == _PNG_SIGNATURE:
        data = bytes(raw)
        if isinstance(result.image, np.ndarray) and result.image.ndim == 3 and result.image.dtype == np.uint8:
            return data, result.image  # the editor decoded exactly these bytes already
        return data, load_rgb(data)
    if result.image is not None:
        rgb = load_rgb(result.image)
    elif raw is not None:
        rgb = load_rgb(bytes(raw))
    else:
        reason = (result.metadata or {}).get("finish_reason")
        raise Banana100Error(f"the editor returned no image (finish_reason={reason!r})")
    return encode_png(rgb), rgb


def _plain(value):
    """numpy scalars -> Python scalars, so that records are JSON and pass validation."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        try:
            return value.item()
        except (TypeError, ValueError):
            return value
    return value


def _metadata_fields(metadata: dict | None, measured_latency: float) -> dict:
    """Editor metadata -> manifest fields; anything not a schema field goes into editor_info."""
    fields, extra = {}, {}
    for key, value in (metadata or {}).items():
        value = _plain(value)
        dtype = _FIELD_DTYPE.get(key)
        if dtype == "string" and isinstance(value, (dict, list, tuple)):
            value = json.dumps(value, sort_keys=True, default=str)
        ok_type = value is None or (
            dtype is not None and not isinstance(value, bool) and isinstance(value, _FIELD_TYPES[dtype])
        )
        if key in _RUNNER_FIELDS or dtype is None or not ok_type:
            extra[key] = value
        elif value is not None:
            if dtype == "float64" and isinstance(value, float) and not math.isfinite(value):
                extra[key] = repr(value)
                continue
            fields[key] = value
    if extra:
        info = fields.get("editor_info")
        try:
            merged = json.loads(info) if info else {}
        except ValueError:
            merged = None
        if not isinstance(merged, dict):
            merged = {"editor_info": info}
        merged.update(
            {k: (v if isinstance(v, (str, int, float, bool, type(None))) else repr(v)) for k, v in extra.items()}
        )
        fields["editor_info"] = json.dumps(merged, sort_keys=True, default=str)
    fields.setdefault("latency_s", round(measured_latency, 6))
    return fields


def step_record(
    editor: Editor, setting: Setting, chain_id: str, source_id: str, repeat: int, step: int, image: str,
    data: bytes, rgb: np.ndarray, parent: str | None, prompt: str | None = None, seed: int | None = None, **fields,
) -> dict:
    """The manifest record of one image (`image`: its path in the run folder)."""
    record = {
        "chain_id": chain_id,
        "source_id": source_id,
        "setting": setting.name,
        "repeat": repeat,
        "step": step,
        "image": image,
        "sha256": sha256_bytes(data),
        "parent_sha256": parent,
        "prompt": prompt,
        "editor": editor.name,
        "model": editor.model,
        "seed": seed,
        "width": int(rgb.shape[1]),
        "height": int(rgb.shape[0]),
        **fields,
        "created_at": utc_now(),
    }
    always = ("parent_sha256", "prompt", "seed")  # explicit nulls at step 0
    return {k: record[k] for k in FIELD_NAMES if record.get(k) is not None or k in always}
