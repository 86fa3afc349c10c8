"""Black Forest Labs' hosted FLUX.2 [pro] and [max] (`flux-2-pro`, `flux-2-max`), over REST with the
standard library.

A step is a job: `POST {base}/v1/{model}` (base `https://api.bfl.ai`; header `x-key:
$BFL_API_KEY`) with `{"prompt", "input_image": base64 PNG, "seed", "output_format": "png",
"safety_tolerance"}` -> `{"id", "polling_url", "cost" (credits, $0.01 each)}`; then `GET polling_url`
until its `status` is `Ready` (`result.sample` is a signed URL, valid about 10 minutes, fetched at
once), or `Error`, `Content Moderated` / `Request Moderated` (a safety refusal), `Task not
found`. Shapes as in docs.bfl.ai's API reference of 2026 (FLUX.2 endpoints, polling).

The job is paid when it is submitted: a fault while polling polls again (never submits again), and
a sample that fails to download or decode is fetched once more before the step is made again with
a new seed. The whole job (submit, polls, download) gets `timeout_s`; past it the call counts as a
timeout (billed at its reservation). FLUX.2 [dev] is an open model: `--editor diffusers`
(docs/open-editors.md). Faults, metering and keys: banana100.chains.editors.service.
"""

from __future__ import annotations

import base64
import json
import time

from banana100.chains.editors.base import EditRequest
from banana100.chains.editors.rest import error_message, request_json
from banana100.chains.editors.service import Call, ServiceEditor, exception_call, image_call, status_call
from banana100.chains.pricing import image_price_for
from banana100.errors import RunStopped
from banana100.imageio import encode_png

DEFAULT_MODEL = "flux-2-pro"
MODELS = ("flux-2-pro", "flux-2-max")
BASE_URL = "https://api.bfl.ai"
CONFIG_KEYS = frozenset({"seed_policy"})
MODERATED = ("Content Moderated", "Request Moderated")


class BFLEditor(ServiceEditor):
    """FLUX.2 [pro]/[max] over BFL's job API. Options: those of every API editor (`ServiceEditor`), and
    safety_tolerance [2] (0 strictest - 5) and poll_s [0.5] between polls."""

    name = "bfl"
    default_model = DEFAULT_MODEL
    key_env = ("BFL_API_KEY",)
    key_url = "https://dashboard.bfl.ai"

    def __init__(self, model: str = DEFAULT_MODEL, *, safety_tolerance: int = 2, poll_s: float = 0.5, **options):
        super().__init__(model, **options)
        if not 0 <= int(safety_tolerance) <= 5:
            raise ValueError(f"BFLEditor: safety_tolerance must be 0-5, got {safety_tolerance!r}")
        self.safety_tolerance = int(safety_tolerance)
        self.poll_s = float(poll_s)
        self.price = image_price_for(self.model)

    def fixed_options(self) -> dict:
        return {"safety_tolerance": self.safety_tolerance}

    def connect(self):
        return {"key": self.api_key(), "url": (self.base_url or BASE_URL).rstrip("/") + f"/v1/{self.model}"}

    def check_config(self, config: dict) -> None:
        unknown = sorted(set(config or {}) - CONFIG_KEYS)
        if unknown:
            raise RunStopped(f"the bfl editor does not know the setting config keys {unknown} "
                             f"(known: {sorted(CONFIG_KEYS)}; FLUX.2 keeps the input's size)")

    def request_config(self, config: dict, seed: int) -> dict:
        self.check_config(config)
        return {"model": self.model, "seed": int(seed), "output_format": "png",
                "safety_tolerance": self.safety_tolerance}

    def estimate_usd(self, config: dict, history_images: int = 0, megapixels: float = 1.0) -> tuple[float, float] | None:
        """A 1 MP image in and out (the output keeps the input's size); the reservation allows 4 MP."""
        if self.price is None:
            return None
        ins = [megapixels] * (1 + int(history_images))
        return self.price.megapixel_usd(megapixels, ins), self.price.megapixel_usd(4.0, [4.0] * len(ins))

    def _prepare(self, client, request: EditRequest, config: dict) -> dict:
        png = request.image_bytes if request.image_bytes is not None else encode_png(request.image)
        height, width = request.image.shape[:2]
        return {"b64": base64.b64encode(png).decode(), "mp": width * height / 1e6}

    def _call(self, client, prepared: dict, request: EditRequest, config: dict, seed: int) -> Call:
        sent = self.request_config(config, seed)
        estimate = self.price.megapixel_usd(prepared["mp"], [prepared["mp"]]) if self.price is not None else 0.0
        deadline = time.monotonic() + self.timeout_s
        try:
            status, headers, body = request_json("POST", client["url"], {"x-key": client["key"]},
                                                 {**sent, "prompt": request.prompt, "input_image": prepared["b64"]},
                                                 self.timeout_s)
        except Exception as e:  # noqa: BLE001 - timeouts, dropped connections
            return exception_call(e, self.timeout_s, self._redact)
        if status != 200 or not isinstance(body, dict) or not body.get("polling_url"):
            return status_call(status if status != 200 else 502, self._redact(error_message(body)),
                               headers.get("retry-after"))
        cost = float(body["cost"]) / 100 if isinstance(body.get("cost"), (int, float)) else estimate
        return self._poll(client, body, cost, deadline, sent)

    def _poll(self, client, job: dict, cost: float, deadline: float, sent: dict) -> Call:
        """Poll a submitted (paid) job to its end; faults here poll again, they never submit again."""
        while True:
            if time.monotonic() > deadline:
                return Call("transient", "timeout", f"job {job.get('id')} not ready within {self.timeout_s:g} s", None)
            self._sleep(self.poll_s)
            try:
                status, _, body = request_json("GET", job["polling_url"], {"x-key": client["key"]}, None,
                                               max(0.1, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - a dropped poll: poll again until the deadline
                continue
            state = body.get("status") if isinstance(body, dict) else None
            if status == 401 or status == 403:
                return status_call(status, self._redact(error_message(body)))
            if status != 200 or state in (None, "Pending"):
                continue
            if state in MODERATED:
                return Call("safety", "safety", f"blocked for safety ({state})", cost, finish_reason=state,
                            safety_reason=state.replace(" ", "_"))
            if state != "Ready":
                return Call("content", "job_error", f"job {job.get('id')} ended with status {state!r}", cost,
                            finish_reason=str(state))
            return self._download(job, body.get("result") or {}, cost, deadline, sent)

    def _download(self, job: dict, result: dict, cost: float, deadline: float, sent: dict) -> Call:
        got = Call("content", "no_image", f"job {job.get('id')} is Ready without a sample", cost)
        for _ in range(2):  # the job is paid: fetch its image twice before making the step again
            if not result.get("sample"):
                break
            try:
                status, _, raw = request_json("GET", result["sample"], {}, None, max(0.1, deadline - time.monotonic()))
            except Exception as e:  # noqa: BLE001
                got = exception_call(e, self.timeout_s, self._redact)
                got = Call("content", got.outcome, got.detail, cost)
                continue
            if status != 200 or not isinstance(raw, (bytes, bytearray)) or not raw:
                got = Call("content", "no_image", f"sample of job {job.get('id')}: HTTP {status}", cost)
                continue
            got = image_call(raw, "image/png", cost, finish_reason="Ready", sent=sent, info={"job_id": job.get("id")})
            if got.kind == "ok":
                break
        return got

    def _metadata(self, call: Call, request: EditRequest) -> dict:
        return {"generation_config": json.dumps(call.result["sent"], sort_keys=True)}
