"""The real editor: Nano Banana Pro (`gemini-3-pro-image-preview`) and Nano Banana 2
(`gemini-3.1-flash-image-preview`, the fast model) through the `google-genai` SDK.

One `edit` is one chain step: the previous image (the stored PNG bytes) and the step's
prompt go to `models.generate_content`; the answer's final image (not the interim "thought"
images), finish reason, thought summaries, token usage and latency come back. Faults are
handled here, with bounded retries, and all of them are counted:

- 429: wait for the Retry-After header (or the RetryInfo delay in the error body), plus jitter;
  without one, exponential backoff with jitter;
- 500/502/503/504/408, timeouts and dropped connections: exponential backoff with jitter;
- an answer with no image, or an image that does not decode completely (truncated, corrupt):
  rejected (never stored), retried with a new seed;
- a safety block (promptFeedback.blockReason, or a SAFETY/IMAGE_SAFETY/PROHIBITED... finish
  reason): counted, retried with a new seed up to `safety_retries` times, then the chain is
  stopped (ChainStopped) with the reason;
- 401/403/404 (bad key, no access, unknown model): the run stops (RunStopped); other 4xx: this
  step fails without retry.

The SDK's own retries are switched off (HttpRetryOptions(attempts=1)) so that these are the
only ones. The API key is read by the SDK from GEMINI_API_KEY / GOOGLE_API_KEY; the editor
never records it, and every message it raises is scrubbed of it. The base URL is `base_url`,
else the SDK's GOOGLE_GEMINI_BASE_URL, else Google's endpoint.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import random
import re
import threading
import time
from collections import Counter

import numpy as np
from PIL import Image

from banana100.imageio import encode_png
from banana100.chains.pricing import price_for
from banana100.chains.editors.base import Editor, EditRequest, EditResult
from banana100.errors import ChainStopped, EditError, RunStopped

DEFAULT_MODEL = "gemini-3-pro-image-preview"
FAST_MODEL = "gemini-3.1-flash-image-preview"
# Defaults of the options `banana100 generate` also offers (its --timeout, --max-attempts, --safety-retries).
TIMEOUT_S = 180.0  # per request
MAX_ATTEMPTS = 6  # calls per step for transient faults
SAFETY_RETRIES = 3  # new-seed retries after safety blocks
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
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
FATAL_STATUS = frozenset({401, 403, 404})
# Setting config keys this editor understands (anything else is refused, not silently dropped).
CONFIG_KEYS = frozenset({"temperature", "top_p", "top_k", "image_size", "aspect_ratio", "seed_policy", "include_thoughts"})
_INT32 = 2**31


def _redactor(extra: tuple[str, ...] = ()):
    secrets = [s for s in (*(os.environ.get(k) for k in KEY_ENV), *extra) if s and len(s) >= 4]
    if not secrets:
        return lambda text: str(text)
    pattern = re.compile("|".join(re.escape(s) for s in sorted(set(secrets), key=len, reverse=True)))
    return lambda text: pattern.sub("[REDACTED]", str(text))


def api_seed(seed: int, retry: int = 0) -> int:
    """The int32 seed sent to the service for a step seed (`retry` > 0: a new one per retry)."""
    if retry == 0:
        return int(seed) % _INT32
    digest = hashlib.sha256(f"banana100-retry:{int(seed)}:{int(retry)}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % _INT32


def decode_image(data: bytes) -> np.ndarray:
    """Decode an answer's image completely, or raise ValueError (truncated, corrupt, not an image)."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.verify()  # chunk CRCs and structure
        with Image.open(io.BytesIO(data)) as im:
            im.load()  # every pixel; a truncated stream raises here
            rgb = np.asarray(im.convert("RGB"))
    except Exception as e:  # noqa: BLE001 - PIL raises many kinds
        raise ValueError(f"undecodable image ({type(e).__name__}: {e})") from None
    if rgb.ndim != 3 or rgb.shape[0] < 1 or rgb.shape[1] < 1:
        raise ValueError(f"image has shape {rgb.shape}")
    return np.ascontiguousarray(rgb)


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


class GeminiEditor(Editor):
    """Nano Banana through google-genai. Thread-safe: one SDK client shared by all chains.

    Options: model, base_url, timeout_s [180] per request, max_attempts [6] calls per step for
    transient faults, safety_retries [3] new-seed retries after safety blocks, backoff_s [2]
    first backoff (doubles per retry, with jitter), backoff_max_s [60], retry_after_max_s
    [600], include_thoughts [True], api_key (default: the SDK reads the environment), client
    (an SDK client, for tests), sleep (for tests).
    """

    name = "gemini"
    metered = True
    supports_chat = True  # same-chat mode: EditRequest.history goes with each request

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        base_url: str | None = None,
        timeout_s: float = TIMEOUT_S,
        max_attempts: int = MAX_ATTEMPTS,
        safety_retries: int = SAFETY_RETRIES,
        backoff_s: float = 2.0,
        backoff_max_s: float = 60.0,
        retry_after_max_s: float = 600.0,
        include_thoughts: bool = True,
        api_key: str | None = None,
        client=None,
        sleep=time.sleep,
        seed_rng: random.Random | None = None,
    ):
        if not model or not isinstance(model, str):
            raise ValueError(f"GeminiEditor: model must be a model id, got {model!r}")
        if int(max_attempts) < 1 or int(safety_retries) < 0:
            raise ValueError("GeminiEditor: max_attempts must be >= 1 and safety_retries >= 0")
        if not timeout_s > 0:
            raise ValueError(f"GeminiEditor: timeout_s must be > 0, got {timeout_s!r}")
        self.model = model
        self.base_url = base_url
        self.timeout_s = float(timeout_s)
        self.max_attempts = int(max_attempts)
        self.safety_retries = int(safety_retries)
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self.retry_after_max_s = float(retry_after_max_s)
        self.include_thoughts = bool(include_thoughts)
        self._api_key = api_key
        self._client = client
        self._client_lock = threading.Lock()
        self._sleep = sleep
        self._jitter = seed_rng or random.Random()
        self._redact = _redactor((api_key,) if api_key else ())
        self.price = price_for(model)

    def __repr__(self) -> str:  # never shows the key
        return f"GeminiEditor(model={self.model!r}, base_url={self.base_url!r}, timeout_s={self.timeout_s})"

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
                        "(https://aistudio.google.com/apikey)"
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

    def _backoff(self, n: int) -> float:
        base = min(self.backoff_max_s, self.backoff_s * (2 ** max(n - 1, 0)))
        return base / 2 + self._jitter.uniform(0, base / 2)  # "equal jitter"

    def _retry_after(self, err) -> float | None:
        headers = getattr(getattr(err, "response", None), "headers", None) or {}
        value = None
        try:
            value = headers.get("retry-after")
        except Exception:  # noqa: BLE001
            value = None
        if value is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                from email.utils import parsedate_to_datetime

                try:
                    return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
                except (TypeError, ValueError):
                    pass
        details = getattr(err, "details", None)
        try:
            for d in (details.get("error", {}) or {}).get("details", []) or []:
                delay = d.get("retryDelay")
                if isinstance(delay, str) and delay.endswith("s"):
                    return max(0.0, float(delay[:-1]))
        except (AttributeError, TypeError, ValueError):
            pass
        return None

    def edit(self, request: EditRequest) -> EditResult:
        try:
            return self._edit(request)
        except EditError:
            raise
        except Exception as e:  # noqa: BLE001 - nothing unscrubbed leaves this editor
            raise EditError(f"gemini editor: {type(e).__name__}: {self._redact(e)}") from None

    def _edit(self, request: EditRequest) -> EditResult:
        from google.genai import errors, types

        client = self.connect()
        config = dict(request.config or {})
        self.check_config(config)
        size = config.get("image_size")
        if request.history is not None:  # same-chat mode: the conversation so far, then this turn
            contents = [_content(types, "user" if side == "user" else "model", turn[side])
                        for turn in request.history for side in ("user", "model")]
            contents.append(_content(types, "user", request.user_turn))
            typical_reserve = self.estimate_usd(config, history_images=_images_in(request) - 1)
        else:
            png = request.image_bytes if request.image_bytes is not None else encode_png(request.image)
            contents = [types.Part.from_bytes(data=png, mime_type="image/png"), request.prompt]
            typical_reserve = self.estimate_usd(config)
        reserve = typical_reserve[1] if typical_reserve else 0.0
        meter = request.meter

        faults: Counter = Counter()
        transient = 0  # calls that ended in a transient fault
        content_retries = 0  # new seeds drawn (safety blocks, no image, bad image)
        safety_blocks, attempts, cost_total = 0, 0, 0.0
        safety_reasons: list[str] = []
        last = "no call made"
        while True:
            seed = api_seed(request.seed, content_retries)
            sent = self.request_config(config, seed)
            attempts += 1
            ticket = None
            if meter is not None:
                ticket = meter.start(
                    reserve, chain_id=request.chain_id, step=request.step, attempt=attempts, seed=seed, model=self.model
                )
            t0 = time.perf_counter()
            cost: float | None = 0.0
            outcome, wait, retry_kind = "ok", None, None
            response = None
            try:
                response = client.models.generate_content(
                    model=self.model, contents=contents, config=types.GenerateContentConfig(**sent)
                )
            except errors.APIError as e:
                code = int(getattr(e, "code", 0) or 0)
                outcome = f"http_{code}"
                last = f"HTTP {code} {getattr(e, 'status', '') or ''}: {self._redact(getattr(e, 'message', '') or '')}"
                if code in FATAL_STATUS:
                    if meter is not None:
                        meter.end(ticket, 0.0, outcome, latency_s=round(time.perf_counter() - t0, 4))
                    raise RunStopped(f"gemini: {last} (model {self.model!r}); no chain can go on") from None
                if code in RETRY_STATUS:
                    retry_kind = "transient"
                    if code == 429:
                        ra = self._retry_after(e)
                        if ra is not None:
                            wait = min(ra, self.retry_after_max_s) + self._jitter.uniform(0, min(1.0, self.backoff_s))
                else:
                    if meter is not None:
                        meter.end(ticket, 0.0, outcome, latency_s=round(time.perf_counter() - t0, 4))
                    raise EditError(f"gemini: {last}; not retried") from None
            except Exception as e:  # noqa: BLE001 - timeouts, dropped connections, unparsable answers
                # The SDK's HTTP layer is httpx or its fork httpx2: match the classes by name.
                kinds = {c.__name__ for c in type(e).__mro__}
                if "TimeoutException" in kinds:
                    outcome, last = "timeout", f"no answer within {self.timeout_s:g} s"
                    cost = None  # the service may have done (and billed) the work
                elif "ConnectError" in kinds:
                    outcome, last = "connect_error", f"cannot connect ({self._redact(e)})"
                elif "TransportError" in kinds:
                    outcome, last = "transport_error", f"{type(e).__name__}: {self._redact(e)}"
                    cost = None
                else:
                    outcome, last = "bad_response", f"unreadable answer ({type(e).__name__}: {self._redact(e)})"
                    cost = None
                retry_kind = "transient"
            latency = time.perf_counter() - t0

            result = None
            if response is not None:
                parsed = self._parse(response, size)
                cost = parsed["cost_usd"]
                if parsed["blocked"]:
                    outcome = "safety"
                    safety_blocks += 1
                    safety_reasons.append(parsed["blocked"])
                    last = f"blocked for safety ({parsed['blocked']})"
                    retry_kind = "safety"
                elif parsed["image"] is None:
                    outcome = parsed["no_image_kind"]
                    last = f"answer without a usable image ({parsed['no_image_detail']})"
                    retry_kind = "content"
                else:
                    result = parsed
            if meter is not None:
                meter.end(
                    ticket,
                    cost,
                    outcome,
                    latency_s=round(latency, 4),
                    seed=seed,
                    finish_reason=(response is not None and parsed.get("finish_reason")) or None,
                )
            cost_total += cost if cost is not None else reserve
            if result is not None:
                return self._result(result, request, sent, seed, attempts, faults, safety_blocks, cost_total, latency)

            faults[outcome] += 1
            details = {
                "step": request.step,
                "attempts": attempts,
                "faults": dict(faults),
                "safety_blocks": safety_blocks,
                "safety_reasons": safety_reasons,
                "cost_usd": round(cost_total, 6),
            }
            if retry_kind == "safety":
                if safety_blocks > self.safety_retries:
                    raise ChainStopped(
                        f"step {request.step} blocked for safety {safety_blocks} times "
                        f"({', '.join(safety_reasons)}); chain stopped",
                        dict(details, reason="safety", last_reason=safety_reasons[-1]),
                    )
                content_retries += 1
                continue
            transient += 1
            if transient >= self.max_attempts:
                raise EditError(
                    f"gemini: step {request.step} failed after {attempts} calls "
                    f"(faults: {json.dumps(dict(faults), sort_keys=True)}); last: {last}"
                )
            if retry_kind == "content":
                content_retries += 1
                continue
            self._sleep(wait if wait is not None else self._backoff(transient))

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

    def _result(self, parsed, request, sent, seed, attempts, faults, safety_blocks, cost_total, latency) -> EditResult:
        data, rgb, mime = parsed["image"]
        info = {
            "faults": dict(faults),
            "mime_type": mime,
            "model_version": parsed["model_version"],
            "response_id": parsed["response_id"],
            "thought_images": parsed["thought_images"],
            "step_seed": int(request.seed),
        }
        if parsed["text"]:
            info["text"] = parsed["text"]
        if request.history is not None:
            info["chat_turns_sent"] = len(request.history) + 1
            info["chat_images_sent"] = _images_in(request)
        metadata = {
            "latency_s": round(latency, 6),
            "finish_reason": parsed["finish_reason"],
            "thought_summary": parsed["thought_summary"],
            "input_tokens": parsed["input_tokens"],
            "output_tokens": parsed["output_tokens"],
            "thought_tokens": parsed["thought_tokens"],
            "attempts": attempts,
            "safety_blocks": safety_blocks,
            "cost_usd": round(cost_total, 8) if self.price is not None else None,
            "generation_config": json.dumps(sent, sort_keys=True),
            "editor_info": json.dumps(info, sort_keys=True, default=str),
        }
        return EditResult(image=rgb, metadata=metadata, image_bytes=data, seed=seed,
                          turn=parsed["turn"] if request.history is not None else None)
