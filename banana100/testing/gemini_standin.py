"""A local stand-in for the Gemini API's generateContent, for tests and the benchmark.

`POST /{version}/models/{model}:generateContent` with the REST body the google-genai SDK
sends; answers like the service: candidates with content parts (a thought summary, an interim
"thought" image, the final image as `inlineData`), a finish reason and usage metadata. The
final image is a real PNG: the input with a little seeded noise (`noise=True`) or the input
bytes unchanged (`noise=False`, cheap: for the benchmark).

Faults are injected from a script: `server.script([...])` queues fault specs consumed one per
request, in order; `server.rules` holds (predicate, spec) pairs applied to every matching
request (predicate of the request info: model, prompt, seed, width, height, config). Specs:

  {"status": 429, "retry_after": "2"}          429 with a Retry-After header
  {"status": 429, "retry_delay": "3s"}         429 with a RetryInfo delay in the error body
  {"status": 500} / {"status": 503} / ...     an error status (401 = bad key, 404 = no model)
  {"status": 400, "echo_key": True}            an error whose message echoes the API key
  {"delay": 5.0}                               answer only after 5 s (longer than the timeout)
  {"no_image": True}                           a text-only answer, finishReason STOP
  {"truncated": True}                          the image's PNG cut in half (valid base64)
  {"bad_base64": True}                         inlineData.data that is not base64
  {"finish_reason": "IMAGE_SAFETY"}            no image, that finish reason
  {"block_reason": "SAFETY"}                   promptFeedback.blockReason, no candidates

Only loopback addresses: the server binds 127.0.0.1 on a free port.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import time
from http.server import BaseHTTPRequestHandler

import numpy as np
from PIL import Image

from banana100.imageio import encode_png
from banana100.testing.loopback import LoopbackServer, request_body

_PATH = re.compile(r"^/(?P<version>[^/]+)/models/(?P<model>[^/:]+):generateContent$")
THOUGHT_TEXT = "**Examining the image**\n\nI see a gradient; I will reproduce it exactly, with no alterations."


class StandIn(LoopbackServer):
    """Start with `StandIn(...)`, use `.base_url`, stop with `.close()` (or as a context manager)."""

    def __init__(self, latency_s: float = 0.0, noise: bool = True, api_key: str | None = None):
        self.latency_s = latency_s
        self.noise = noise
        self.api_key = api_key
        super().__init__()
        self.inflight = 0
        self.max_inflight = 0
        self.base_url = self._serve(self._handler())

    # -- answering -----------------------------------------------------------------------

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out at once, as from a real server

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = request_body(self)
                if body is None:
                    return
                m = _PATH.match(self.path.split("?")[0])
                if not m:
                    return self._send(404, {"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}})
                key = self.headers.get("x-goog-api-key") or ""
                with standin.lock:
                    standin.inflight += 1
                    standin.max_inflight = max(standin.max_inflight, standin.inflight)
                try:
                    status, payload, headers, delay = standin._answer(m["model"], json.loads(body or b"{}"), key)
                    if delay:
                        time.sleep(delay)
                    try:
                        self._send(status, payload, headers)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                finally:
                    with standin.lock:
                        standin.inflight -= 1

            def _send(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def _answer(self, model: str, body: dict, key: str):
        contents = _camel(body["contents"])
        image_b64, prompt, images_in = None, None, 0
        for turn in contents:  # the image edited: the latest one in the conversation that is not a draft
            for p in turn["parts"]:
                inline = p.get("inlineData")
                if inline:
                    images_in += 1
                    if not p.get("thought"):
                        image_b64 = inline["data"]
                elif "text" in p and turn.get("role", "user") == "user":
                    prompt = p["text"]
        gen = _camel(body.get("generationConfig") or {})  # proto JSON accepts both spellings
        raw = _b64(image_b64)
        with Image.open(io.BytesIO(raw)) as im:
            width, height = im.size
        info = {
            "model": model,
            "prompt": prompt,
            "seed": gen.get("seed"),
            "config": gen,
            "width": width,
            "height": height,
            "sha256": hashlib.sha256(raw).hexdigest(),
            "turns": len(contents),
            "images_in": images_in,
            "history_problems": _history_problems(contents),
        }
        spec = self._take_spec(info, key)
        status, payload, headers, delay = self._respond(spec, raw, info, key)
        if status == 200 and "usageMetadata" in payload:  # each image sent is billed as input
            payload["usageMetadata"]["promptTokenCount"] = 560 * max(images_in, 1) + 20 * ((len(contents) + 1) // 2)
        with self.lock:
            self.responses.append("ok" if status == 200 and not spec else _label(spec, status))
        return status, payload, headers, delay + self.latency_s

    def _respond(self, spec: dict, raw: bytes, info: dict, key: str):
        usage = {
            "promptTokenCount": 580,
            "candidatesTokenCount": 1130,
            "thoughtsTokenCount": 250,
            "totalTokenCount": 1960,
            "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": 1120}, {"modality": "TEXT", "tokenCount": 10}],
        }
        if "status" in spec:
            code = int(spec["status"])
            names = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                     429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
            message = f"injected {code}"
            if spec.get("echo_key"):
                message += f": API key {key} is not valid for this request"
            err = {"code": code, "message": message, "status": names.get(code, "UNKNOWN")}
            headers = {}
            if spec.get("retry_after") is not None:
                headers["Retry-After"] = str(spec["retry_after"])
            if spec.get("retry_delay"):
                err["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": spec["retry_delay"]}]
            return code, {"error": err}, headers, 0.0
        if spec.get("block_reason"):
            payload = {"promptFeedback": {"blockReason": spec["block_reason"]}, "usageMetadata": {"promptTokenCount": 580, "totalTokenCount": 580}}
            return 200, payload, {}, 0.0
        thought = {"text": THOUGHT_TEXT, "thought": True}
        if spec.get("finish_reason"):
            cand = {"content": {"role": "model", "parts": [thought]}, "finishReason": spec["finish_reason"], "index": 0}
            return 200, {"candidates": [cand], "usageMetadata": dict(usage, candidatesTokenCount=0, candidatesTokensDetails=[])}, {}, 0.0
        if spec.get("no_image"):
            parts = [thought, {"text": "I'm sorry, I can't produce that image."}]
            cand = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            return 200, {"candidates": [cand], "usageMetadata": dict(usage, candidatesTokenCount=12, candidatesTokensDetails=[])}, {}, 0.0
        out = self._image(raw, info)
        data = base64.b64encode(out).decode()
        if spec.get("truncated"):
            data = base64.b64encode(out[: len(out) // 2]).decode()
        if spec.get("bad_base64"):
            data = "!!not-base64!!" + data[:50]
        draft = base64.b64encode(encode_png(np.zeros((8, 8, 3), np.uint8))).decode()
        parts = [
            thought,
            {"inlineData": {"mimeType": "image/png", "data": draft}, "thought": True},  # an interim thought image
            {"inlineData": {"mimeType": "image/png", "data": data}, "thoughtSignature": _signature(out)},
        ]
        cand = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        payload = {"candidates": [cand], "usageMetadata": usage, "modelVersion": info["model"], "responseId": "standin"}
        return 200, payload, {}, float(spec.get("delay", 0.0))

    def _image(self, raw: bytes, info: dict) -> bytes:
        if not self.noise:
            return raw
        with Image.open(io.BytesIO(raw)) as im:
            rgb = np.asarray(im.convert("RGB")).astype(np.int16)
        rng = np.random.default_rng(int(info["seed"] or 0))
        rgb = np.clip(rgb + rng.integers(-2, 3, rgb.shape), 0, 255).astype(np.uint8)
        return encode_png(rgb)


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_"))  # the SDK sends urlsafe


def _signature(image: bytes) -> str:
    """The stand-in's thought signature of an answer: tied to the image it came with."""
    return base64.b64encode(b"standin-sig:" + hashlib.sha256(image).digest()[:12]).decode()


def _history_problems(contents: list) -> list[str]:
    """What is wrong with a conversation as the service would see it (same-chat mode): roles
    must alternate user/model from a user turn, and each model turn must come back as it was
    sent: its thought summary, its draft and its final image with that image's signature."""
    problems = []
    for i, turn in enumerate(contents):
        role = turn.get("role", "user")
        if role != ("user" if i % 2 == 0 else "model"):
            problems.append(f"turn {i} has role {role!r}")
        if role != "model":
            continue
        parts = turn["parts"]
        finals = [p for p in parts if p.get("inlineData") and not p.get("thought")]
        if not any(p.get("thought") and p.get("text") == THOUGHT_TEXT for p in parts):
            problems.append(f"turn {i}: the thought summary is missing")
        if not any(p.get("thought") and p.get("inlineData") for p in parts):
            problems.append(f"turn {i}: the draft image is missing")
        if len(finals) != 1:
            problems.append(f"turn {i}: {len(finals)} final images")
        elif _b64(finals[0].get("thoughtSignature") or "") != _b64(_signature(_b64(finals[0]["inlineData"]["data"]))):
            problems.append(f"turn {i}: the final image's thought signature is missing or not its own")
    return problems


def _label(spec: dict, status: int) -> str:
    if "status" in spec:
        return f"http_{status}"
    return next(iter(spec), "ok")


def _camel(value):
    if isinstance(value, dict):
        return {re.sub(r"_([a-z])", lambda m: m[1].upper(), k): _camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value
