"""xAI's Grok Imagine (`grok-imagine-image`) through its REST API, with the standard library.

One image edit per step, `POST {base}/images/edits` (base `https://api.x.ai/v1`; JSON, which the
service requires for edits, not the multipart of OpenAI's SDK): `{"model", "prompt", "image": {"url":
"data:image/png;base64,...", "type": "image_url"}, "response_format": "b64_json", "n": 1}` with
`Authorization: Bearer $XAI_API_KEY` -> `{"data": [{"b64_json", "revised_prompt"}]}`. Shapes as in
docs.x.ai's image editing guide of 2026. A setting's `image_size` 1K/2K is sent as `resolution`
1k/2k. The service takes no seed (the recorded seed names the step) and keeps no conversation, so
this editor makes different-chat chains only. A refusal for content moderation (an error whose
message names moderation or the content policy) is a safety refusal; other faults, metering and
keys: banana100.chains.editors.service.
"""

from __future__ import annotations

import base64
import json

from banana100.chains.editors.base import EditRequest
from banana100.chains.editors.rest import error_message, request_json
from banana100.chains.editors.service import Call, ServiceEditor, exception_call, image_call, status_call
from banana100.chains.pricing import image_price_for
from banana100.errors import RunStopped
from banana100.imageio import encode_png

DEFAULT_MODEL = "grok-imagine-image"
BASE_URL = "https://api.x.ai/v1"
RESOLUTIONS = {"1K": "1k", "2K": "2k"}
CONFIG_KEYS = frozenset({"image_size", "seed_policy"})
_SAFETY_WORDS = ("moderation", "content policy", "safety")


class XAIEditor(ServiceEditor):
    """Grok Imagine over REST. Options: those of every API editor (`ServiceEditor`)."""

    name = "xai"
    default_model = DEFAULT_MODEL
    key_env = ("XAI_API_KEY",)
    key_url = "https://console.x.ai"

    def __init__(self, model: str = DEFAULT_MODEL, **options):
        super().__init__(model, **options)
        self.price = image_price_for(self.model)

    def connect(self):
        return {"key": self.api_key(), "url": (self.base_url or BASE_URL).rstrip("/") + "/images/edits"}

    def check_config(self, config: dict) -> None:
        unknown = sorted(set(config or {}) - CONFIG_KEYS)
        if unknown:
            raise RunStopped(f"the xai editor does not know the setting config keys {unknown} "
                             f"(known: {sorted(CONFIG_KEYS)})")
        size = (config or {}).get("image_size")
        if size is not None and str(size) not in RESOLUTIONS:
            raise RunStopped(f"the xai editor makes 1K or 2K images: image_size {size!r} is not possible")

    def request_config(self, config: dict, seed: int) -> dict:
        self.check_config(config)
        out = {"model": self.model, "response_format": "b64_json", "n": 1}
        if (config or {}).get("image_size"):
            out["resolution"] = RESOLUTIONS[str(config["image_size"])]
        return out

    def estimate_usd(self, config: dict, history_images: int = 0) -> tuple[float, float] | None:
        if self.price is None:
            return None
        usd = self.price.call_usd(images_in=1 + int(history_images))
        return usd, usd

    def _prepare(self, client, request: EditRequest, config: dict) -> dict:
        png = request.image_bytes if request.image_bytes is not None else encode_png(request.image)
        sent = self.request_config(config, 0)
        body = dict(sent, prompt=request.prompt,
                    image={"url": "data:image/png;base64," + base64.b64encode(png).decode(), "type": "image_url"})
        return {"sent": sent, "body": body}

    def _call(self, client, prepared: dict, request: EditRequest, config: dict, seed: int) -> Call:
        cost = self.estimate_usd(config)[0] if self.price is not None else 0.0
        try:
            status, headers, body = request_json("POST", client["url"], {"Authorization": f"Bearer {client['key']}"},
                                                 prepared["body"], self.timeout_s)
        except Exception as e:  # noqa: BLE001 - timeouts, dropped connections
            return exception_call(e, self.timeout_s, self._redact)
        if status != 200:
            message = self._redact(error_message(body))
            safety = "content_moderation" if status == 400 and any(w in message.lower() for w in _SAFETY_WORDS) else None
            return status_call(status, message, headers.get("retry-after"), safety=safety)
        data = [d for d in (body.get("data") or []) if d.get("b64_json")] if isinstance(body, dict) else []
        if not data:
            return Call("content", "no_image", "answer without an image", cost, finish_reason="no_image")
        try:
            raw = base64.b64decode(data[-1]["b64_json"], validate=True)
        except ValueError as e:
            return Call("content", "bad_image", f"answer without a usable image (base64: {e})", cost)
        return image_call(raw, "image/png", cost, finish_reason="completed", sent=prepared["sent"],
                          info={"revised_prompt": data[-1].get("revised_prompt") or None})

    def _metadata(self, call: Call, request: EditRequest) -> dict:
        return {"generation_config": json.dumps(call.result["sent"], sort_keys=True)}
