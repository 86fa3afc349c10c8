"""The real editor: Nano Banana Pro (`gemini-3-pro-image-preview`) and Nano Banana 2
(`gemini-3.1-flash-image-preview`, the fast model) through the `google-genai` SDK.

One `edit` is one chain step: the previous image (the stored PNG bytes) and the step's
prompt go to `models.generate_content`; the answer's final image (not the interim "thought"
images), finish reason, thought summaries, token usage and latency come back. Faults are
handled by the API editors' shared loop (`banana100.chains.editors.service`: 429 with
Retry-After, or the RetryInfo delay in the error body; 5xx, timeouts; no image or a truncated
one; safety blocks, here promptFeedback.blockReason or a SAFETY/IMAGE_SAFETY/PROHIBITED...
finish reason; a bad key), with bounded retries, and all of them are counted.

The SDK's own retries are switched off (HttpRetryOptions(attempts=1)) so that these are the
only ones. The API key is read by the SDK from GEMINI_API_KEY / GOOGLE_API_KEY; the editor
never records it, and every message it raises is scrubbed of it. The base URL is `base_url`,
else the SDK's GOOGLE_GEMINI_BASE_URL, else Google's endpoint.
"""

from __future__ import annotations

import base64
import json
import os

from banana100.chains.pricing import price_for
from banana100.chains.editors.base import EditRequest
from banana100.chains.editors.service import (
    MAX_ATTEMPTS, SAFETY_RETRIES, TIMEOUT_S, Call, ServiceEditor, api_seed, decode_image, exception_call, status_call,
)
from banana100.errors import RunStopped
from banana100.imageio import encode_png

__all__ = ["DEFAULT_MODEL", "FAST_MODEL", "MAX_ATTEMPTS", "SAFETY_RETRIES", "TIMEOUT_S", "GeminiEditor", "api_seed",
           "decode_image"]

DEFAULT_MODEL = "gemini-3-pro-image-preview"
FAST_MODEL = "gemini-3.1-flash-image-preview"
KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

SAFETY_REASONS = frozenset(
    {
        "SAFETY",
        "IMAGE_SAFETY",
        "PROHIBITED_CONTENT",
        "IMAGE_PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "RECITATION",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)
# Setting config keys this editor understands (anything else is refused, not silently dropped).
CONFIG_KEYS = frozenset({"temperature", "top_p", "top_k", "image_size", "aspect_ratio", "seed_policy", "include_thoughts"})
def _turn_part(part) -> dict:
    """An SDK Part -> a banana100.chains.chat part (text or image, thought flag, signature)."""
    out: dict = {}
    inline = getattr(part, "inline_data", None)
    if inline is not None and getattr(inline, "data", None):
        data = inline.data
        out["inline_data"] = {"mime_type": getattr(inline, "mime_type", None),
                              "data": base64.b64decode(data) if isinstance(data, str) else bytes(data)}
    elif getattr(part, "text", None) is not None:
        out["text"] = part.text
    if getattr(part, "thought", False):
        out["thought"] = True
    sig = getattr(part, "thought_signature", None)
    if sig:
        out["thought_signature"] = base64.b64decode(sig) if isinstance(sig, str) else bytes(sig)
    return out


def _content(types, role: str, parts: list[dict]):
    """banana100.chains.chat parts -> an SDK Content, signatures and thought flags kept."""
    out = []
    for p in parts:
        kw = {}
        if "inline_data" in p:
            kw["inline_data"] = types.Blob(data=p["inline_data"]["data"], mime_type=p["inline_data"]["mime_type"])
        else:
            kw["text"] = p.get("text", "")
        if p.get("thought"):
            kw["thought"] = True
        if p.get("thought_signature") is not None:
            kw["thought_signature"] = p["thought_signature"]
        out.append(types.Part(**kw))
    return types.Content(role=role, parts=out)


def _images_in(request: EditRequest) -> int:
    from banana100.chains.chat import count_images, history_images

    return history_images(request.history) + count_images(request.user_turn)


def _enum(value) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


class GeminiEditor(ServiceEditor):
    """Nano Banana through google-genai. Thread-safe: one SDK client shared by all chains.

    Options: those of every API editor (`ServiceEditor`: model, base_url, timeout_s, max_attempts,
    safety_retries, backoff, api_key, client, sleep), and include_thoughts [True].
    """

    name = "gemini"
    default_model = DEFAULT_MODEL
    key_env = KEY_ENV
    key_url = "https://aistudio.google.com/apikey"
    supports_chat = True  # same-chat mode: EditRequest.history goes with each request
    # the dry run's same-chat cost line ends with this
    chat_cost_note = ("; interim thought images the model returns go back too (up to two a step) and are reserved "
                      "at their real count under --max-cost")

    def __init__(self, model: str = DEFAULT_MODEL, *, include_thoughts: bool = True, **options):
        super().__init__(model, **options)
        self.include_thoughts = bool(include_thoughts)
        self.price = price_for(self.model)

    # -- set-up --------------------------------------------------------------------------

    def connect(self):
        """Build the SDK client now (a missing key fails here, before any work)."""
        from banana100.extras import require_extra

        require_extra("gemini", "the gemini editor")
        with self._client_lock:
            if self._client is None:
                if not (self._api_key or any(os.environ.get(k) for k in KEY_ENV)):
                    raise RunStopped(
                        "no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) to a Gemini API key "
                        f"({self.key_url})"
                    )
                from google import genai
                from google.genai import types

                http = types.HttpOptions(
                    base_url=self.base_url or None,
                    timeout=int(self.timeout_s * 1000),
                    retry_options=types.HttpRetryOptions(attempts=1),  # our retries only
                )
                try:
                    kwargs = {"http_options": http}
                    if self._api_key:
                        kwargs["api_key"] = self._api_key
                    self._client = genai.Client(**kwargs)
                except Exception as e:  # noqa: BLE001
                    raise RunStopped(f"cannot create the Gemini client: {self._redact(e)}") from None
            return self._client

    def check_config(self, config: dict) -> None:
        unknown = sorted(set(config or {}) - CONFIG_KEYS)
        if unknown:
            raise RunStopped(
                f"the gemini editor does not know the setting config keys {unknown} (known: {sorted(CONFIG_KEYS)})"
            )

    def request_config(self, config: dict, seed: int) -> dict:
        """The generation config sent for one call, as the JSON recorded in the manifest."""
        self.check_config(config)
        out: dict = {"response_modalities": ["TEXT", "IMAGE"], "seed": int(seed)}
        for key in ("temperature", "top_p", "top_k"):
            if config.get(key) is not None:
                out[key] = config[key]
        image = {k: str(config[k]) for k in ("image_size", "aspect_ratio") if config.get(k) is not None}
        if image:
            out["image_config"] = image
        if config.get("include_thoughts", self.include_thoughts):
            out["thinking_config"] = {"include_thoughts": True}
        return out

    def estimate_usd(self, config: dict, history_images: int = 0) -> tuple[float, float] | None:
        """(typical, reserved) USD of one call under this config, `history_images` earlier images
        sent along (same-chat mode: each is billed as input); None when pricing is unknown."""
        if self.price is None:
            return None
        size = (config or {}).get("image_size")
        images_in = 1 + int(history_images)
        return self.price.typical_call(size, images_in=images_in), self.price.reserve_call(size, images_in=images_in)

    # -- one step ------------------------------------------------------------------------

    def _history_images(self, request: EditRequest) -> int:
        return _images_in(request) - 1 if request.history is not None else 0

    def _prepare(self, client, request: EditRequest, config: dict):
        from google.genai import types

        if request.history is not None:  # same-chat mode: the conversation so far, then this turn
            contents = [_content(types, "user" if side == "user" else "model", turn[side])
                        for turn in request.history for side in ("user", "model")]
            contents.append(_content(types, "user", request.user_turn))
            return contents
        png = request.image_bytes if request.image_bytes is not None else encode_png(request.image)
        return [types.Part.from_bytes(data=png, mime_type="image/png"), request.prompt]

    def _call(self, client, contents, request: EditRequest, config: dict, seed: int) -> Call:
        from google.genai import errors, types

        sent = self.request_config(config, seed)
        try:
            response = client.models.generate_content(model=self.model, contents=contents,
                                                      config=types.GenerateContentConfig(**sent))
        except errors.APIError as e:
            code = int(getattr(e, "code", 0) or 0)
            message = f"{getattr(e, 'status', '') or ''}: {self._redact(getattr(e, 'message', '') or '')}".strip(": ")
            headers = getattr(getattr(e, "response", None), "headers", None) or {}
            try:
                wait = headers.get("retry-after")
            except Exception:  # noqa: BLE001
                wait = None
            return status_call(code, message, wait if wait is not None else _retry_delay(e))
        except Exception as e:  # noqa: BLE001 - timeouts, dropped connections, unparsable answers
            return exception_call(e, self.timeout_s, self._redact)
        return self._answer(response, config.get("image_size"), sent)

    def _answer(self, response, size, sent: dict) -> Call:
        parsed = self._parse(response, size)
        cost = parsed["cost_usd"]
        if parsed["blocked"]:
            return Call("safety", "safety", f"blocked for safety ({parsed['blocked']})", cost,
                        finish_reason=parsed["finish_reason"], safety_reason=parsed["blocked"])
        if parsed["image"] is None:
            return Call("content", parsed["no_image_kind"],
                        f"answer without a usable image ({parsed['no_image_detail']})", cost,
                        finish_reason=parsed["finish_reason"])
        data, rgb, mime = parsed["image"]  # decoded in full by _parse
        return Call("ok", "ok", "", cost, finish_reason=parsed["finish_reason"],
                    result={"data": data, "rgb": rgb, "mime": mime, "turn": parsed["turn"], "parsed": parsed,
                            "sent": sent})

    def _metadata(self, call: Call, request: EditRequest) -> dict:
        parsed = call.result["parsed"]
        info = {"model_version": parsed["model_version"], "response_id": parsed["response_id"],
                "thought_images": parsed["thought_images"]}
        if parsed["text"]:
            info["text"] = parsed["text"]
        if request.history is not None:
            info["chat_turns_sent"] = len(request.history) + 1
            info["chat_images_sent"] = _images_in(request)
        call.result["info"] = info
        return {
            "thought_summary": parsed["thought_summary"],
            "input_tokens": parsed["input_tokens"],
            "output_tokens": parsed["output_tokens"],
            "thought_tokens": parsed["thought_tokens"],
            "generation_config": json.dumps(call.result["sent"], sort_keys=True),
        }

    def _parse(self, response, size) -> dict:
        candidates = getattr(response, "candidates", None) or []
        cand = candidates[0] if candidates else None
        finish = _enum(getattr(cand, "finish_reason", None)) if cand is not None else None
        feedback = getattr(response, "prompt_feedback", None)
        block = _enum(getattr(feedback, "block_reason", None)) if feedback is not None else None
        parts = (getattr(getattr(cand, "content", None), "parts", None) or []) if cand is not None else []
        thoughts, texts, images, thought_images = [], [], [], 0
        turn = []  # every part as returned (same-chat mode sends them back)
        for part in parts:
            turn.append(_turn_part(part))
            is_thought = bool(getattr(part, "thought", False))
            inline = getattr(part, "inline_data", None)
            if inline is not None and getattr(inline, "data", None):
                if is_thought:
                    thought_images += 1
                else:
                    images.append((inline.data, getattr(inline, "mime_type", None)))
            elif getattr(part, "text", None):
                (thoughts if is_thought else texts).append(part.text)
        usage = getattr(response, "usage_metadata", None)
        prompt_t = getattr(usage, "prompt_token_count", None) if usage is not None else None
        cand_t = getattr(usage, "candidates_token_count", None) if usage is not None else None
        thought_t = getattr(usage, "thoughts_token_count", None) if usage is not None else None
        image_t = None
        for d in (getattr(usage, "candidates_tokens_details", None) or []) if usage is not None else []:
            if _enum(getattr(d, "modality", None)) == "IMAGE":
                image_t = (image_t or 0) + int(getattr(d, "token_count", 0) or 0)
        cost = 0.0
        if self.price is not None:
            cost = self.price.from_usage(prompt_t, cand_t, thought_t, image_t, len(images), size)
        out = {
            "finish_reason": finish or (f"BLOCKED_{block}" if block else None),
            "blocked": block or (finish if finish in SAFETY_REASONS else None),
            "thought_summary": "\n\n".join(thoughts) if thoughts else None,
            "text": "\n\n".join(texts) if texts else None,
            "thought_images": thought_images,
            "input_tokens": prompt_t,
            "output_tokens": cand_t,
            "thought_tokens": thought_t,
            "cost_usd": cost,
            "model_version": getattr(response, "model_version", None),
            "response_id": getattr(response, "response_id", None),
            "image": None,
            "turn": turn,
        }
        if not images:
            out["no_image_kind"] = "no_image"
            out["no_image_detail"] = f"finish_reason={finish}, {len(texts)} text part(s)"
            return out
        data, mime = images[-1]  # the final image; earlier ones would be drafts
        if isinstance(data, str):  # some SDK versions keep base64 text
            data = base64.b64decode(data)
        try:
            rgb = decode_image(bytes(data))
        except ValueError as e:
            out["no_image_kind"] = "bad_image"
            out["no_image_detail"] = f"{mime}: {e}"
            return out
        out["image"] = (bytes(data), rgb, mime)
        return out


def _retry_delay(err) -> float | None:
    """The RetryInfo delay ("3s") in a Gemini error body, in seconds."""
    details = getattr(err, "details", None)
    try:
        for d in (details.get("error", {}) or {}).get("details", []) or []:
            delay = d.get("retryDelay")
            if isinstance(delay, str) and delay.endswith("s"):
                return max(0.0, float(delay[:-1]))
    except (AttributeError, TypeError, ValueError):
        pass
    return None
