"""A local stand-in for the image APIs of OpenAI, xAI and Black Forest Labs, for tests.

One server on 127.0.0.1 (a free port) answers, in the shapes the editors send and read:

- OpenAI, `POST /v1/images/edits` (multipart: image, prompt, model, size, quality, output_format)
  -> `{"created", "data": [{"b64_json"}], "usage": {...}, "size", "quality"}`;
- OpenAI, `POST /v1/responses` (JSON: model, input, previous_response_id, tools=[{"type":
  "image_generation", ...}]) -> `{"id": "resp_...", "output": [{"type": "image_generation_call", "id",
  "status": "completed", "result": b64}, {"type": "message", ...}], "usage"}`; the stand-in keeps
  every response it gave, so a `previous_response_id` it never gave is an error (404), and the
  image a follow-up edits is the one of that previous response;
- xAI, `POST /v1/images/edits` on the `/xai` prefix (JSON: model, prompt, image: {"url": data URL,
  "type": "image_url"}, response_format "b64_json") -> `{"data": [{"b64_json"}]}`;
- BFL, `POST /bfl/v1/{model}` (JSON: prompt, input_image base64, seed, output_format, header
  x-key) -> `{"id", "polling_url"}`; `GET` the polling URL -> `{"status": "Pending"}` for
  `pending_polls` polls, then `{"status": "Ready", "result": {"sample": URL}}`; `GET` the sample
  URL (no key: a signed URL) -> the PNG.

The output image is the input with a little noise seeded by the input's sha256 and the prompt
(`noise=True`), or the input unchanged. Faults come from `script([...])` (one spec per request,
in order) or `rules` ((predicate, spec) pairs on the request info), as in gemini_standin.py:

  {"status": 429, "retry_after": "2"}   {"status": 500}   {"status": 401}
  {"status": 400, "echo_key": True}     an error whose message echoes the API key
  {"delay": 5.0}                        answer after 5 s          {"no_image": True}
  {"truncated": True}                   the PNG cut in half       {"safety": True}   refused for safety
  {"poll_error": "Error"}               (BFL) the job fails        {"expired": True}  (BFL) sample gone

Each request's info: api (openai_edit, openai_responses, xai, bfl, bfl_poll, bfl_sample), model,
prompt, sha256 (of the image edited), width, height, config, key, previous_response_id, turns.
"""

from __future__ import annotations

import base64
import hashlib
import io
import itertools
import json
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import numpy as np
from PIL import Image

from banana100.imageio import encode_png
from banana100.testing.loopback import LoopbackServer, request_body


def _multipart(ctype: str, body: bytes) -> list[tuple[str, bytes]]:
    """(field name, bytes) of a multipart/form-data body, byte-exact."""
    boundary = ctype.split("boundary=", 1)[1].strip().strip('"').encode()
    out = []
    for chunk in body.split(b"--" + boundary)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, value = chunk.partition(b"\r\n\r\n")
        name = head.split(b'name="', 1)[1].split(b'"', 1)[0].decode()
        out.append((name, value[:-2] if value.endswith(b"\r\n") else value))
    return out


class ImageAPIStandIn(LoopbackServer):
    """Start with `ImageAPIStandIn()`, use `.openai_url`, `.xai_url`, `.bfl_url`; stop with `.close()`."""

    def __init__(self, latency_s: float = 0.0, noise: bool = True, pending_polls: int = 1):
        self.latency_s = latency_s
        self.noise = noise
        self.pending_polls = pending_polls
        super().__init__()
        self.stored: dict[str, bytes] = {}  # OpenAI response id -> its image (previous_response_id)
        self.jobs: dict[str, dict] = {}  # BFL job id -> {"polls", "image", "spec"}
        self._ids = itertools.count(1)
        base = self.base = self._serve(self._handler())
        self.openai_url, self.xai_url, self.bfl_url = f"{base}/v1", f"{base}/xai/v1", f"{base}/bfl"

    def asked(self, api: str) -> list[dict]:
        """The requests made to one api (e.g. "openai_edit"), in arrival order."""
        return [q for q in self.requests if q["api"] == api]

    # -- the HTTP side ---------------------------------------------------------------------------

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = request_body(self)
                if body is None:
                    return
                self._reply(*standin._post(self.path, dict(self.headers), body))

            def do_GET(self):
                self._reply(*standin._get(self.path, dict(self.headers)))

            def _reply(self, status, payload, headers, delay):
                if delay:
                    time.sleep(delay)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    ctype = "image/png" if isinstance(payload, bytes) else "application/json"
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler

    def _post(self, path: str, headers: dict, body: bytes):
        path = urlparse(path).path
        lower = {k.lower(): v for k, v in headers.items()}
        key = (lower.get("authorization") or "").removeprefix("Bearer ") or lower.get("x-key") or ""
        if path == "/v1/images/edits":
            return self._openai_edit(lower.get("content-type", ""), body, key)
        if path == "/v1/responses":
            return self._openai_responses(json.loads(body or b"{}"), key)
        if path == "/xai/v1/images/edits":
            return self._xai(json.loads(body or b"{}"), key)
        if path.startswith("/bfl/v1/"):
            return self._bfl_submit(path.rsplit("/", 1)[1], json.loads(body or b"{}"), key)
        return 404, {"error": {"message": f"no route {path}"}}, {}, 0.0

    def _get(self, path: str, headers: dict):
        url = urlparse(path)
        lower = {k.lower(): v for k, v in headers.items()}
        if url.path == "/bfl/v1/get_result":
            return self._bfl_poll(parse_qs(url.query).get("id", [""])[0], lower.get("x-key") or "")
        if url.path.startswith("/bfl/delivery/"):
            return self._bfl_sample(url.path.rsplit("/", 1)[1].removesuffix(".png"))
        return 404, {"error": {"message": f"no route {url.path}"}}, {}, 0.0

    # -- bookkeeping -----------------------------------------------------------------------------

    def _take(self, info: dict, key: str) -> dict:
        raw = info.pop("_image", None)
        if raw is not None:
            with Image.open(io.BytesIO(raw)) as im:
                info["width"], info["height"] = im.size
            info["sha256"] = hashlib.sha256(raw).hexdigest()
        info["key"] = key
        return self._take_spec(info, key)

    def _note(self, spec: dict, status: int) -> None:
        with self.lock:
            self.responses.append("ok" if status == 200 and not spec else
                                  f"http_{status}" if "status" in spec else next(iter(spec), "ok"))

    def _error(self, spec: dict, key: str, shape: str):
        code = int(spec["status"])
        message = f"injected {code}" + (f": API key {key} is not valid for this request" if spec.get("echo_key") else "")
        headers = {"Retry-After": str(spec["retry_after"])} if spec.get("retry_after") is not None else {}
        payload = {"detail": message} if shape == "bfl" else {"error": {"message": message, "type": "invalid_request_error",
                                                                        "code": None}}
        return code, payload, headers, 0.0

    def _out(self, raw: bytes, prompt: str | None) -> bytes:
        if not self.noise:
            return raw
        with Image.open(io.BytesIO(raw)) as im:
            rgb = np.asarray(im.convert("RGB")).astype(np.int16)
        seed = int.from_bytes(hashlib.sha256(raw + (prompt or "").encode()).digest()[:8], "big")
        rng = np.random.default_rng(seed)
        return encode_png(np.clip(rgb + rng.integers(-2, 3, rgb.shape), 0, 255).astype(np.uint8))

    def _image_b64(self, raw: bytes, prompt: str | None, spec: dict) -> str:
        out = self._out(raw, prompt)
        if spec.get("truncated"):
            out = out[: len(out) // 2]
        return base64.b64encode(out).decode()

    # -- OpenAI ----------------------------------------------------------------------------------

    def _openai_edit(self, ctype: str, body: bytes, key: str):
        fields, raw = {}, None
        for name, value in _multipart(ctype, body):
            if name in ("image", "image[]"):
                raw = value
            else:
                fields[name] = value.decode()
        if raw is None:
            return 400, {"error": {"message": "image is required", "type": "invalid_request_error",
                                   "code": None}}, {}, 0.0
        info = {"api": "openai_edit", "model": fields.get("model"), "prompt": fields.get("prompt"), "_image": raw,
                "config": {k: fields[k] for k in ("size", "quality", "output_format", "n") if k in fields}}
        spec = self._take(info, key)
        status, payload, headers, delay = self._openai_answer(spec, key, raw, info, edit=True)
        self._note(spec, status)
        return status, payload, headers, delay + self.latency_s

    def _openai_answer(self, spec: dict, key: str, raw: bytes, info: dict, edit: bool):
        if "status" in spec:
            return self._error(spec, key, "openai")
        if spec.get("safety"):
            return 400, {"error": {"message": "Your request was rejected by the safety system.",
                                   "type": "image_generation_user_error", "code": "moderation_blocked"}}, {}, 0.0
        usage = {"input_tokens": 1080, "input_tokens_details": {"image_tokens": 1060, "text_tokens": 20},
                 "output_tokens": 1056, "total_tokens": 2136}
        if spec.get("no_image"):
            data = []
        else:
            data = [{"b64_json": self._image_b64(raw, info["prompt"], spec)}]
        if edit:
            return 200, {"created": int(time.time()), "data": data, "usage": usage, "size": info["config"].get("size"),
                         "quality": info["config"].get("quality"), "output_format": "png"}, {}, float(spec.get("delay", 0))
        rid = f"resp_standin_{next(self._ids):06d}"
        output = [{"type": "message", "id": f"msg_{rid}", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": "Here is the edited image.", "annotations": []}]}]
        if data:
            output.insert(0, {"type": "image_generation_call", "id": f"ig_{rid}", "status": "completed",
                              "result": data[0]["b64_json"], "revised_prompt": info["prompt"]})
            if not spec.get("truncated"):
                with self.lock:
                    self.stored[rid] = base64.b64decode(data[0]["b64_json"])
        payload = {"id": rid, "object": "response", "created_at": int(time.time()), "status": "completed",
                   "model": info["model"], "output": output, "usage": {"input_tokens": 1200, "output_tokens": 60,
                                                                       "total_tokens": 1260}}
        return 200, payload, {}, float(spec.get("delay", 0))

    def _openai_responses(self, body: dict, key: str):
        prev = body.get("previous_response_id")
        texts, images = [], []
        for item in body.get("input") or []:
            for c in item.get("content") or []:
                if c.get("type") == "input_text":
                    texts.append(c["text"])
                elif c.get("type") == "input_image":
                    images.append(base64.b64decode(c["image_url"].split(",", 1)[1]))
        tool = next((t for t in body.get("tools") or [] if t.get("type") == "image_generation"), {})
        problems = []
        with self.lock:
            known = self.stored.get(prev) if prev else None
        if prev and known is None:
            problems.append(f"unknown previous_response_id {prev}")
        raw = images[-1] if images else known
        info = {"api": "openai_responses", "model": tool.get("model"), "chat_model": body.get("model"),
                "prompt": texts[-1] if texts else None, "_image": raw, "previous_response_id": prev,
                "images_in": len(images), "config": {k: tool[k] for k in ("size", "quality", "output_format")
                                                     if k in tool}, "history_problems": problems}
        spec = self._take(info, key)
        if problems:
            status, payload, headers, delay = 404, {"error": {"message": f"Previous response with id '{prev}' not found.",
                                                              "type": "invalid_request_error",
                                                              "code": "previous_response_not_found"}}, {}, 0.0
        elif raw is None:
            status, payload, headers, delay = 400, {"error": {"message": "no image to edit"}}, {}, 0.0
        else:
            status, payload, headers, delay = self._openai_answer(spec, key, raw, info, edit=False)
        self._note(spec, status)
        return status, payload, headers, delay + self.latency_s

    # -- xAI -------------------------------------------------------------------------------------

    def _xai(self, body: dict, key: str):
        url = (body.get("image") or {}).get("url") or ""
        raw = base64.b64decode(url.split(",", 1)[1]) if url.startswith("data:") else None
        info = {"api": "xai", "model": body.get("model"), "prompt": body.get("prompt"), "_image": raw,
                "config": {k: body[k] for k in ("response_format", "n", "resolution", "aspect_ratio") if k in body}}
        spec = self._take(info, key)
        if "status" in spec:
            status, payload, headers, delay = self._error(spec, key, "xai")
        elif spec.get("safety"):
            status, payload, headers, delay = 400, {"code": "Client specified an invalid argument",
                                                    "error": "Generated image rejected by content moderation."}, {}, 0.0
        elif spec.get("no_image"):
            status, payload, headers, delay = 200, {"data": []}, {}, float(spec.get("delay", 0))
        else:
            payload = {"data": [{"b64_json": self._image_b64(raw, info["prompt"], spec), "revised_prompt": ""}]}
            status, headers, delay = 200, {}, float(spec.get("delay", 0))
        self._note(spec, status)
        return status, payload, headers, delay + self.latency_s

    # -- BFL -------------------------------------------------------------------------------------

    def _bfl_submit(self, model: str, body: dict, key: str):
        raw = base64.b64decode(body["input_image"]) if body.get("input_image") else None
        info = {"api": "bfl", "model": model, "prompt": body.get("prompt"), "_image": raw, "seed": body.get("seed"),
                "config": {k: body[k] for k in ("output_format", "safety_tolerance", "seed") if k in body}}
        spec = self._take(info, key)
        if "status" in spec:
            status, payload, headers, delay = self._error(spec, key, "bfl")
        else:
            jid = f"job{next(self._ids):06d}"
            with self.lock:
                self.jobs[jid] = {"polls": 0, "image": raw, "prompt": info["prompt"], "spec": spec, "key": key}
            payload = {"id": jid, "polling_url": f"{self.bfl_url}/v1/get_result?id={jid}", "cost": 4.5,
                       "input_mp": 1.0, "output_mp": 1.0}
            status, headers, delay = 200, {}, 0.0
        self._note(spec, status)
        return status, payload, headers, delay + self.latency_s

    def _bfl_poll(self, jid: str, key: str):
        with self.lock:
            job = self.jobs.get(jid)
            self.requests.append({"api": "bfl_poll", "id": jid, "key": key})
            self.keys_seen.add(key)
            if job is not None:
                job["polls"] += 1
        if job is None:
            return 404, {"id": jid, "status": "Task not found"}, {}, 0.0
        spec = job["spec"]
        if job["polls"] <= self.pending_polls:
            return 200, {"id": jid, "status": "Pending", "result": None, "progress": 0.5}, {}, 0.0
        if spec.get("safety"):
            return 200, {"id": jid, "status": "Content Moderated", "result": None,
                         "details": {"moderation_reasons": ["Derivative Works Filter"]}}, {}, float(spec.get("delay", 0))
        if spec.get("poll_error"):
            return 200, {"id": jid, "status": spec["poll_error"], "result": None}, {}, 0.0
        return 200, {"id": jid, "status": "Ready", "result": {"sample": f"{self.bfl_url}/delivery/{jid}.png",
                                                              "prompt": job["prompt"], "seed": 0}}, {}, \
            float(spec.get("delay", 0))

    def _bfl_sample(self, jid: str):
        with self.lock:
            job = self.jobs.get(jid)
            self.requests.append({"api": "bfl_sample", "id": jid})
        if job is None or job["spec"].get("expired"):
            return 404, {"detail": "expired"}, {}, 0.0
        spec = job["spec"]
        if spec.get("no_image"):
            return 200, b"", {}, 0.0
        out = self._out(job["image"], job["prompt"])
        if spec.get("truncated"):
            out = out[: len(out) // 2]
        return 200, out, {}, 0.0
