"""The one definition of a chain-image record: the manifest line, the dataset row.

Each field has a `datasets` dtype, whether every record must have it, and a one-line doc that
the dataset card prints. The manifest writer, the manifest reader, the dataset features and
the card all read this list; add a field here and it appears everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    name: str
    dtype: str  # a `datasets.Value` dtype
    required: bool
    doc: str


RECORD_FIELDS: tuple[Field, ...] = (
    Field("chain_id", "string", True, "Chain identifier: `{source_id}__{setting}[__{variant}][__same-chat]__r{repeat}`."),
    Field("source_id", "string", True, "Source image identifier (its file stem)."),
    Field("setting", "string", True, "Generation setting (see the settings table)."),
    Field("repeat", "int32", True, "Repeat index of this source x setting, from 0."),
    Field("chat_mode", "string", False, "`different` (a fresh conversation for every step, the paper's protocol) or `same` (one conversation per chain); null means `different`."),
    Field("variant", "string", False, "Free label that tells apart chains of one source, setting and chat mode in an imported release (e.g. the editor family of a supplement sequence); null for chains made here."),
    Field("step", "int32", True, "0 = the source image, 1..N = the editor's outputs."),
    Field("image", "string", True, "Image path relative to the run folder (manifest only)."),
    Field("sha256", "string", True, "SHA-256 of the image file's bytes."),
    Field("parent_sha256", "string", False, "SHA-256 of the previous step's image; null at step 0."),
    Field("prompt", "string", False, "Exact instruction sent to the editor; null at step 0."),
    Field("editor", "string", True, "Editor implementation (`simulated`, `gemini`, `source`)."),
    Field("model", "string", True, "Model id (e.g. `gemini-3-pro-image-preview`, `simulated-v1`)."),
    Field("seed", "int64", False, "Seed passed to the editor for this step."),
    Field("width", "int32", True, "Image width in pixels."),
    Field("height", "int32", True, "Image height in pixels."),
    Field("latency_s", "float64", False, "Wall time of the editor call, seconds."),
    Field("finish_reason", "string", False, "Finish reason reported by the editor."),
    Field("thought_summary", "string", False, "The model's thought summary, when it returns one."),
    Field("input_tokens", "int64", False, "Prompt tokens reported by the service."),
    Field("output_tokens", "int64", False, "Output tokens reported by the service."),
    Field("attempts", "int32", False, "Calls made to obtain this step (1 = no retry)."),
    Field("thought_tokens", "int64", False, "Thinking tokens reported by the service."),
    Field("safety_blocks", "int32", False, "Answers blocked for safety before this step's image (each retried with a new seed)."),
    Field("cost_usd", "float64", False, "Estimated USD of every call made for this step, retries included (generation/pricing.yaml)."),
    Field("turn_sha256", "string", False, "Same chat: SHA-256 of the step's stored turn file (`step_NNN.turn.json`), checked before the conversation is replayed; null otherwise."),
    Field("generation_config", "string", False, "Editor configuration used, as JSON."),
    Field("editor_info", "string", False, "Other editor-specific metadata, as JSON."),
    Field("created_at", "string", False, "UTC time the record was written (ISO 8601)."),
)

FIELD_NAMES = tuple(f.name for f in RECORD_FIELDS)
REQUIRED_FIELDS = tuple(f.name for f in RECORD_FIELDS if f.required)

_PY_TYPES = {"string": str, "int32": int, "int64": int, "float64": (int, float)}


def validate_record(record: dict) -> list[str]:
    """Return the problems of one record (empty when it is valid)."""
    problems = []
    for f in RECORD_FIELDS:
        value = record.get(f.name)
        if value is None:
            if f.required:
                problems.append(f"missing field {f.name!r}")
            continue
        if isinstance(value, bool) or not isinstance(value, _PY_TYPES[f.dtype]):
            problems.append(f"field {f.name!r} should be {f.dtype}, got {type(value).__name__}")
    unknown = sorted(set(record) - set(FIELD_NAMES))
    if unknown:
        problems.append(f"unknown fields {unknown}")
    return problems


CHAT_MODES = ("different", "same")
#: A record without `chat_mode` (null, or made before the field existed) is the paper's protocol.
DEFAULT_CHAT_MODE = "different"


def chat_mode_of(record: dict) -> str:
    """The record's chat mode, null read as `DEFAULT_CHAT_MODE`."""
    return record.get("chat_mode") or DEFAULT_CHAT_MODE

#: The fields every record of one chain shares (its id is made from them).
CHAIN_KEYS = ("setting", "source_id", "repeat", "chat_mode", "variant")


def chain_id(source_id: str, setting: str, repeat: int, chat_mode: str | None = None,
             variant: str | None = None) -> str:
    """`{source_id}__{setting}__r{repeat}`, with `__{variant}` and `__same-chat` before the repeat
    when they apply, so that chains differing only in variant or chat mode never share an id (and a
    folder). The paper's different-chat chains keep the id they always had."""
    if chat_mode not in (None, *CHAT_MODES):
        raise ValueError(f"chat_mode {chat_mode!r}: expected one of {', '.join(CHAT_MODES)}")
    parts = [source_id, setting]
    if variant:
        parts.append(variant)
    if chat_mode == "same":
        parts.append("same-chat")
    return "__".join(parts) + f"__r{repeat}"
