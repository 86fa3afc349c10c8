"""OpenAI's GPT Image models (`gpt-image-1.5` by default) through the `openai` package.

- Different chat (the paper's protocol): one image edit per step, `POST /v1/images/edits`
  (`client.images.edit`: the stored PNG, the prompt, `model`, `size`, `quality`,
  `output_format=png`) -> `data[0].b64_json` and the token `usage`.
- Same chat: one conversation the service holds, through the Responses API
  (`client.responses.create` with the `image_generation` tool, forced by `tool_choice`, and
  `previous_response_id`): step 1 sends the source image and the prompt, step k only the prompt
  and the id of step k-1's response, whose image the model edits. Each step's answer is kept in
  its turn file with that id (banana100.chains.chat), so a resumed chain continues the
  conversation from the run folder. OpenAI keeps a response for 30 days (`store=true`, the
  default): a chain resumed later gets `previous_response_not_found`, and is stopped with that
  reason (its steps stay).

Request and answer shapes as in the API reference of 2026 (images/edits; responses/create with
the image_generation tool, whose output item is `{"type": "image_generation_call", "result":
base64}`). The size sent is the one of 1024x1024, 1536x1024, 1024x1536 nearest the input's aspect
ratio (so the price is known before the call); GPT Image takes no seed, so the recorded seed only
names the step. A safety refusal is the error code `moderation_blocked` (or
`content_policy_violation`); the SDK's own retries are off (`max_retries=0`). Faults, metering and
keys: banana100.chains.editors.service. The key is read from OPENAI_API_KEY.
"""

from __future__ import annotations

import base64
import json

from banana100.chains.editors.base import EditRequest
from banana100.chains.editors.service import Call, ServiceEditor, exception_call, image_call, status_call
from banana100.chains.pricing import image_price_for
from banana100.errors import RunStopped
from banana100.imageio import encode_png

DEFAULT_MODEL = "gpt-image-1.5"
CHAT_MODEL = "gpt-5"  # the Responses API's mainline model, which calls the image tool (same chat)
QUALITIES = ("low", "medium", "high")
SIZES = {"square": "1024x1024", "landscape": "1536x1024", "portrait": "1024x1536"}
SAFETY_CODES = frozenset({"moderation_blocked", "content_policy_violation"})
CONFIG_KEYS = frozenset({"image_size", "seed_policy"})


def size_for(width: int, height: int) -> str:
    """The GPT Image size nearest an input's aspect ratio."""
    ratio = width / max(height, 1)
    return SIZES["landscape"] if ratio > 1.2 else SIZES["portrait"] if ratio < 1 / 1.2 else SIZES["square"]


def _images_in(request: EditRequest) -> int:
    from banana100.chains.chat import count_images, history_images

    return history_images(request.history) + count_images(request.user_turn)


class OpenAIEditor(ServiceEditor):
    """GPT Image through the openai SDK. Options: those of every API editor (`ServiceEditor`), and
    quality [medium] (low, medium, high) and chat_model [gpt-5] (same chat only)."""

    name = "openai"
    default_model = DEFAULT_MODEL
    key_env = ("OPENAI_API_KEY",)
    key_url = "https://platform.openai.com/api-keys"
    supports_chat = True

    def __init__(self, model: str = DEFAULT_MODEL, *, quality: str = "medium", chat_model: str = CHAT_MODEL,
                 **options):
        super().__init__(model, **options)
        if quality not in QUALITIES:
            raise ValueError(f"OpenAIEditor: quality must be one of {', '.join(QUALITIES)}, got {quality!r}")
        self.quality = quality
        self.chat_model = chat_model
        self.price = image_price_for(self.model)

    def fixed_options(self) -> dict:
        return {"quality": self.quality}

    def connect(self):
        from banana100.extras import require_extra

        require_extra("openai", "the openai editor")
        with self._client_lock:
            if self._client is None:
                key = self.api_key()
                import openai

                try:
                    self._client = openai.OpenAI(api_key=key, base_url=self.base_url or None, timeout=self.timeout_s,
                                                 max_retries=0)
                except Exception as e:  # noqa: BLE001
                    raise RunStopped(f"cannot create the OpenAI client: {self._redact(e)}") from None
            return self._client

    def check_config(self, config: dict) -> None:
        unknown = sorted(set(config or {}) - CONFIG_KEYS)
        if unknown:
            raise RunStopped(f"the openai editor does not know the setting config keys {unknown} "
                             f"(known: {sorted(CONFIG_KEYS)}; GPT Image takes no temperature or seed)")
        size = (config or {}).get("image_size")
        if size is not None and str(size) != "1K":
            raise RunStopped(f"the openai editor makes images of at most 1536 pixels: image_size {size!r} is not "
                             "possible (use a 1K setting)")

    def request_config(self, config: dict, seed: int) -> dict:
        """What one call sends besides the image and prompt (the size follows the input's aspect)."""
        self.check_config(config)
        return {"model": self.model, "quality": self.quality, "output_format": "png",
                "size": "/".join(SIZES.values()) + " (nearest the input's aspect)"}

    def estimate_usd(self, config: dict, history_images: int = 0) -> tuple[float, float] | None:
        if self.price is None:
            return None
        images_in = 1 + int(history_images)
        return (self.price.call_usd(self.quality, SIZES["square"], images_in),
                self.price.call_usd(self.quality, SIZES["landscape"], images_in))

    # -- one step --------------------------------------------------------------------------------

    def _history_images(self, request: EditRequest) -> int:
        return _images_in(request) - 1 if request.history is not None else 0

    def _prepare(self, client, request: EditRequest, config: dict) -> dict:
        height, width = request.image.shape[:2]
        sent = {"model": self.model, "quality": self.quality, "size": size_for(width, height), "output_format": "png"}
        if request.history is None:
            return {"sent": sent, "png": request.image_bytes if request.image_bytes is not None
                    else encode_png(request.image)}
        previous = None
        if request.history:
            previous = next((p["response_id"] for p in request.history[-1]["model"] if p.get("response_id")), None)
            if previous is None:
                raise RunStopped("openai: the stored turn of the previous step has no response id, so the "
                                 "conversation cannot go on (was it made by another editor?)")
        content = []
        for part in request.user_turn:
            if "inline_data" in part:
                data = base64.b64encode(part["inline_data"]["data"]).decode()
                content.append({"type": "input_image",
                                "image_url": f"data:{part['inline_data']['mime_type']};base64,{data}"})
            elif part.get("text") is not None:
                content.append({"type": "input_text", "text": part["text"]})
        return {"sent": dict(sent, chat_model=self.chat_model, previous_response_id=previous),
                "input": [{"role": "user", "content": content}], "previous": previous}

    def _call(self, client, prepared: dict, request: EditRequest, config: dict, seed: int) -> Call:
        import openai

        sent = prepared["sent"]
        images_in = _images_in(request) if request.history is not None else 1
        fallback = self.price.call_usd(self.quality, sent["size"], images_in) if self.price else 0.0
        try:
            if request.history is None:
                answer = client.images.edit(image=("image.png", prepared["png"], "image/png"), prompt=request.prompt,
                                            model=self.model, size=sent["size"], quality=self.quality,
                                            output_format="png", n=1)
                return self._edit_answer(answer, sent, fallback)
            tool = {"type": "image_generation", "model": self.model, "quality": self.quality, "size": sent["size"],
                    "output_format": "png"}
            follow = {"previous_response_id": prepared["previous"]} if prepared["previous"] else {}
            answer = client.responses.create(model=self.chat_model, input=prepared["input"], tools=[tool],
                                             tool_choice={"type": "image_generation"}, store=True, **follow)
            return self._chat_answer(answer, sent, fallback)
        except openai.APIStatusError as e:
            return self._status(e)
        except Exception as e:  # noqa: BLE001 - timeouts, dropped connections, unparsable answers
            return exception_call(e, self.timeout_s, self._redact)

    def _status(self, e) -> Call:
        body = e.body if isinstance(e.body, dict) else {}
        err = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
        code = str(err.get("code") or "")
        message = self._redact(err.get("message") or e.message or "")
        if code == "previous_response_not_found":
            return Call("stop", "previous_response_not_found",
                        f"the service no longer holds this chain's conversation ({message}); OpenAI keeps a response "
                        "30 days: start the chain again in a new --out folder", 0.0)
        headers = getattr(getattr(e, "response", None), "headers", None) or {}
        return status_call(int(e.status_code), message, headers.get("retry-after"),
                           safety=code if code in SAFETY_CODES else None)

    def _edit_answer(self, answer, sent: dict, fallback: float) -> Call:
        usage = getattr(answer, "usage", None)
        cost = fallback
        tokens = {}
        if usage is not None and self.price is not None:
            details = getattr(usage, "input_tokens_details", None)
            image_in = int(getattr(details, "image_tokens", 0) or 0)
            text_in = int(getattr(details, "text_tokens", 0) or 0)
            out = int(getattr(usage, "output_tokens", 0) or 0)
            tokens = {"input_tokens": int(getattr(usage, "input_tokens", 0) or 0), "output_tokens": out}
            priced = self.price.usage_usd(text_in, image_in, out)
            cost = priced if priced is not None else fallback
        data = [d for d in (getattr(answer, "data", None) or []) if getattr(d, "b64_json", None)]
        if not data:
            return Call("content", "no_image", "answer without an image", cost, finish_reason="no_image")
        try:
            raw = base64.b64decode(data[-1].b64_json, validate=True)
        except ValueError as e:
            return Call("content", "bad_image", f"answer without a usable image (base64: {e})", cost)
        got = image_call(raw, "image/png", cost, finish_reason="completed", sent=sent, tokens=tokens,
                         info={"revised_prompt": getattr(data[-1], "revised_prompt", None)})
        return got

    def _chat_answer(self, answer, sent: dict, fallback: float) -> Call:
        rid = getattr(answer, "id", None)
        calls = [o for o in (getattr(answer, "output", None) or []) if getattr(o, "type", None) == "image_generation_call"]
        texts = [c.text for o in (getattr(answer, "output", None) or []) if getattr(o, "type", None) == "message"
                 for c in (getattr(o, "content", None) or []) if getattr(c, "text", None)]
        done = [c for c in calls if getattr(c, "result", None)]
        if not done:
            status = getattr(calls[-1], "status", None) if calls else None
            return Call("content", "no_image", f"answer without an image (image call status {status})", fallback,
                        finish_reason=str(status or "no_image"))
        try:
            raw = base64.b64decode(done[-1].result, validate=True)
        except ValueError as e:
            return Call("content", "bad_image", f"answer without a usable image (base64: {e})", fallback)
        turn = [{"inline_data": {"mime_type": "image/png", "data": raw}}]
        if texts:
            turn.append({"text": "\n\n".join(texts)})
        turn.append({"response_id": rid})
        usage = getattr(answer, "usage", None)
        tokens = {"input_tokens": getattr(usage, "input_tokens", None), "output_tokens": getattr(usage, "output_tokens", None)}
        return image_call(raw, "image/png", fallback, finish_reason=str(getattr(answer, "status", None) or "completed"),
                          sent=sent, tokens=tokens, turn=turn,
                          info={"response_id": rid, "text": "\n\n".join(texts) or None,
                                "revised_prompt": getattr(done[-1], "revised_prompt", None)})

    def _metadata(self, call: Call, request: EditRequest) -> dict:
        res = call.result
        if request.history is not None:
            res["info"]["chat_turns_sent"] = len(request.history) + 1
        return {**{k: v for k, v in res.get("tokens", {}).items() if v is not None},
                "generation_config": json.dumps(res["sent"], sort_keys=True)}
