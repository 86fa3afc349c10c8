"""Same-chat mode: one conversation per chain, kept on disk so that a resumed chain replays it.

In the paper's protocol (`chat_mode = "different"`) every step is a fresh request: the previous
image and the prompt. In `chat_mode = "same"` (the `more_models` supplement's "same chat"
variant) a chain is one conversation:

- turn 1: user [the source image (step_000.png), the step-1 prompt] -> model [its answer];
- turn k > 1: user [the step-k prompt] -> model [its answer]. The image being edited is the
  model's previous answer, already in the conversation, so it is not attached again.

Each request sends every earlier turn. The model's turns go back exactly as the service returned
them, every part (thought summaries, interim images, the final image) with its
`thought_signature`, which the service asks for to keep its reasoning across turns. So the
runner stores each step's answer beside its image as `step_NNN.turn.json`, before the step's
record, and the record keeps the file's own sha256 (`turn_sha256`): the history of a resumed
chain is rebuilt from these files and the prompts in the manifest, and nothing already paid for
is asked again. A turn file changed since (an edited thought, a replaced `thought_signature`,
parts removed or added) is refused before any request (`check_turns`): the service would be sent
a conversation it never had. Records written before `turn_sha256` existed are replayed unchecked,
with a warning naming the chain.

A part, here and in `EditRequest.history` / `EditResult.turn`, is a plain dict: `{"text": str}`
or `{"inline_data": {"mime_type": str, "data": bytes}}`, with optional `"thought": True` and
`"thought_signature": bytes`; or `{"response_id": str}`, the service's own id of the answer when the
service holds the conversation (OpenAI's Responses API: the next turn names it as
`previous_response_id`, so the stored turn is what a resumed chain continues from).
On disk bytes are base64; the final image's bytes, when they are
the step's stored PNG, are a reference to it instead of a copy.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

from banana100.chains.manifest import MANIFEST_NAME
from banana100.errors import ManifestError
from banana100.fileio import sha256_bytes, write_file_atomic

log = logging.getLogger(__name__)

TURN_FORMAT = 1


def turn_name(step: int) -> str:
    return f"step_{step:03d}.turn.json"


def user_parts(step: int, prompt: str, source_png: bytes | None) -> list[dict]:
    """The user's turn for output step `step`: the source image and prompt first, then the prompt only."""
    if step == 1:
        if source_png is None:
            raise ValueError("same-chat step 1 needs the source image")
        return [{"inline_data": {"mime_type": "image/png", "data": source_png}}, {"text": prompt}]
    return [{"text": prompt}]


def _part_to_json(part: dict, image_sha: str) -> dict:
    out = {}
    if part.get("text") is not None:
        out["text"] = part["text"]
    inline = part.get("inline_data")
    if inline is not None:
        data = bytes(inline["data"])
        if sha256_bytes(data) == image_sha:
            out["inline_data"] = {"mime_type": inline.get("mime_type"), "step_image": True}
        else:
            out["inline_data"] = {"mime_type": inline.get("mime_type"), "data_b64": base64.b64encode(data).decode()}
    if part.get("thought"):
        out["thought"] = True
    if part.get("thought_signature") is not None:
        out["thought_signature_b64"] = base64.b64encode(bytes(part["thought_signature"])).decode()
    if part.get("response_id") is not None:
        out["response_id"] = str(part["response_id"])
    return out


def _part_from_json(obj: dict, image: bytes, where: Path) -> dict:
    part = {}
    if "text" in obj:
        part["text"] = obj["text"]
    inline = obj.get("inline_data")
    if inline is not None:
        if inline.get("step_image"):
            data = image
        elif "data_b64" in inline:
            data = base64.b64decode(inline["data_b64"])
        else:
            raise ManifestError(f"{where}: an image part with neither data nor a step reference")
        part["inline_data"] = {"mime_type": inline.get("mime_type"), "data": data}
    if obj.get("thought"):
        part["thought"] = True
    if "thought_signature_b64" in obj:
        part["thought_signature"] = base64.b64decode(obj["thought_signature_b64"])
    if "response_id" in obj:
        part["response_id"] = obj["response_id"]
    return part


def write_turn(chain_dir: Path, step: int, parts: list[dict], image_data: bytes) -> str:
    """Store the model's answer of one step (atomically, before the step's record); returns the
    file's sha256, for the record's `turn_sha256`."""
    sha = sha256_bytes(image_data)
    body = {"format": TURN_FORMAT, "step": step, "image_sha256": sha,
            "parts": [_part_to_json(p, sha) for p in parts]}
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    write_file_atomic(chain_dir / turn_name(step), data)
    return sha256_bytes(data)


def _turn_bytes(path: Path, record: dict) -> bytes:
    """The turn file of `record`'s step, refused when missing or changed since it was recorded."""
    step = record["step"]
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ManifestError(
            f"{path}: missing; this same-chat chain's conversation cannot be replayed past step {step - 1}. "
            "Restore the file, or start the chain again in a new --out folder"
        ) from None
    except OSError as e:
        raise ManifestError(f"{path}: not a readable turn file ({e})") from None
    want = record.get("turn_sha256")
    if want is not None and sha256_bytes(raw) != want:
        raise ManifestError(
            f"{path}: changed since step {step} was recorded (its sha256 is not the turn_sha256 in "
            f"{MANIFEST_NAME}), so it is not the conversation the model had; nothing was sent. Restore the "
            "file, or start the chain again in a new --out folder"
        )
    return raw


def check_turns(run_dir: Path, records: list[dict]) -> None:
    """Before a same-chat chain goes on (records sorted by step): every turn file is there and as
    recorded; a chain whose records predate `turn_sha256` gets a warning instead."""
    unchecked = 0
    for rec in records[1:]:
        _turn_bytes((run_dir / rec["image"]).parent / turn_name(rec["step"]), rec)
        unchecked += rec.get("turn_sha256") is None
    if unchecked:
        log.warning("%s: %d turn file(s) were recorded before banana100 kept their sha256 (turn_sha256); they are "
                    "replayed unchecked: an edited file would be sent as it is", records[0]["chain_id"], unchecked)


def read_turn(chain_dir: Path, record: dict, image_data: bytes) -> list[dict]:
    step = record["step"]
    path = chain_dir / turn_name(step)
    try:
        body = json.loads(_turn_bytes(path, record).decode("utf-8"))
    except ValueError as e:
        raise ManifestError(f"{path}: not a readable turn file ({e})") from None
    if not isinstance(body, dict) or body.get("step") != step or not isinstance(body.get("parts"), list):
        raise ManifestError(f"{path}: not the turn of step {step}")
    if body.get("image_sha256") != sha256_bytes(image_data):
        raise ManifestError(f"{path}: written for another image than step {step}'s (its image_sha256 differs)")
    return [_part_from_json(p, image_data, path) for p in body["parts"]]


def rebuild_history(run_dir: Path, records: list[dict], source_png: bytes) -> list[dict]:
    """The conversation of a same-chat chain from its stored steps 0..n (records sorted by step;
    `source_png`: step 0's file): [{"user": parts, "model": parts}, ...] for steps 1..n."""
    history = []
    for rec in records[1:]:
        image = (run_dir / rec["image"]).read_bytes()
        chain_dir = (run_dir / rec["image"]).parent
        history.append({"user": user_parts(rec["step"], rec.get("prompt") or "", source_png),
                        "model": read_turn(chain_dir, rec, image)})
    return history


def count_images(parts: list[dict] | None) -> int:
    return sum("inline_data" in p for p in parts or ())


def history_images(history: list[dict] | None) -> int:
    """Images a same-chat request carries from its history (each billed as input)."""
    return sum(count_images(turn["user"]) + count_images(turn["model"]) for turn in history or ())
