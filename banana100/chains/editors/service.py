"""What every paid API editor shares: one retry loop, the call meter, and the rules for faults.

An API editor (gemini, openai, xai, bfl) writes how to make one call and how to read its answer
(`ServiceEditor._call`, returning a `Call`); this module does the rest, the same way for all:

- 429: wait for Retry-After (or the delay the error names), plus jitter; without one, exponential
  backoff with jitter;
- 408/500/502/503/504, timeouts and dropped connections: exponential backoff with jitter;
- an answer with no image, or an image that does not decode completely (truncated, corrupt):
  rejected (never stored), retried with a new seed;
- a safety refusal: counted, retried with a new seed up to `safety_retries` times, then the chain
  is stopped (ChainStopped) with the reason;
- 401/403/404 (bad key, no access, unknown model): the run stops (RunStopped); other 4xx: this
  step fails without retry.

All bounded by `max_attempts` calls per step for transient faults. Every call is metered
(`EditRequest.meter`: the ledger, --max-cost, --rpm), a call that may have been billed without an
answer (a timeout) at its reserved amount. Keys: read from the environment by the editor (never
recorded); every message leaving an editor is scrubbed of them (`redactor`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from banana100.chains.editors.base import Editor, EditRequest, EditResult
from banana100.errors import ChainStopped, EditError, RunStopped

TIMEOUT_S = 180.0  # per request
MAX_ATTEMPTS = 6  # calls per step for transient faults
SAFETY_RETRIES = 3  # new-seed retries after safety refusals
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
FATAL_STATUS = frozenset({401, 403, 404})
_INT32 = 2**31


def redactor(secrets):
    """text -> text with every secret (of 4+ characters) replaced by [REDACTED]."""
    secrets = [s for s in secrets if s and len(s) >= 4]
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


def retry_after_s(value) -> float | None:
    """A Retry-After header's value (seconds or an HTTP date) -> seconds to wait; None if absent or unreadable."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(str(value)).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


@dataclass
class Call:
    """What one service call came to. `kind`: "ok", "transient" (retry after a wait), "content"
    (no usable image: retry with a new seed), "safety" (refused for safety), "fatal" (no chain can go
    on), "refused" (this step fails, not retried) or "stop" (this chain cannot go on, e.g. the service
    lost its conversation: ChainStopped)."""

    kind: str
    outcome: str  # calls.jsonl's outcome: ok, http_429, timeout, safety, bad_image, ...
    detail: str = ""  # scrubbed, for messages
    cost: float | None = 0.0  # USD; None = unknown (the service may have billed it: its reservation is charged)
    wait: float | None = None  # seconds the service asked to wait (Retry-After)
    finish_reason: str | None = None
    safety_reason: str | None = None
    result: dict = field(default_factory=dict)  # kind "ok": data, rgb, mime and the editor's own fields


def image_call(data: bytes, mime: str | None, cost: float | None, **fields) -> Call:
    """The Call of an answer carrying image bytes: "ok" once they decode in full, else "content"."""
    try:
        rgb = decode_image(bytes(data))
    except ValueError as e:
        return Call("content", "bad_image", f"answer without a usable image ({mime}: {e})", cost,
                    finish_reason=fields.get("finish_reason"))
    return Call("ok", "ok", "", cost, finish_reason=fields.get("finish_reason"),
                result={"data": bytes(data), "rgb": rgb, "mime": mime, **fields})


def status_call(code: int, message: str, retry_after=None, safety: str | None = None) -> Call:
    """The Call of an HTTP error status (`safety`: the service's reason when the error is a safety refusal)."""
    label = f"http_{code}"
    if safety:
        return Call("safety", "safety", f"blocked for safety ({safety})", 0.0, safety_reason=safety)
    detail = f"HTTP {code}: {message}"
    if code in FATAL_STATUS:
        return Call("fatal", label, detail)
    if code in RETRY_STATUS:
        return Call("transient", label, detail, wait=retry_after_s(retry_after) if code == 429 else None)
    return Call("refused", label, detail)


def exception_call(e: BaseException, timeout_s: float, redact) -> Call:
    """The Call of an exception raised by a client (httpx, urllib, an SDK): timeouts, refused or
    dropped connections, unreadable answers; all transient."""
    kinds = {c.__name__ for c in type(e).__mro__}
    # what the client wraps: urllib's URLError the socket's error, an SDK's connection error httpx's
    for inner in (getattr(e, "reason", None), e.__cause__):
        if isinstance(inner, BaseException):
            kinds |= {c.__name__ for c in type(inner).__mro__}
    if kinds & {"TimeoutException", "APITimeoutError", "timeout", "TimeoutError", "ReadTimeout"}:
        return Call("transient", "timeout", f"no answer within {timeout_s:g} s", None)
    # nothing was sent (the connection never opened): free; a connection dropped later may have been billed
    if kinds & {"ConnectError", "ConnectionRefusedError", "URLError"} and not (
            kinds & {"RemoteProtocolError", "ConnectionResetError", "IncompleteRead", "RemoteDisconnected"}):
        return Call("transient", "connect_error", f"cannot connect ({redact(e)})", 0.0)
    if kinds & {"TransportError", "ConnectionError", "RemoteDisconnected", "IncompleteRead", "OSError",
                 "APIConnectionError"}:
        return Call("transient", "transport_error", f"{type(e).__name__}: {redact(e)}", None)
    return Call("transient", "bad_response", f"unreadable answer ({type(e).__name__}: {redact(e)})", None)


@dataclass
class _Tally:
    """The calls of one step so far."""

    attempts: int = 0
    transient: int = 0  # calls that ended in a transient fault or an unusable image
    content_retries: int = 0  # new seeds drawn (safety refusals, no image, bad image)
    safety_blocks: int = 0
    cost: float = 0.0
    faults: Counter = field(default_factory=Counter)
    safety_reasons: list = field(default_factory=list)

    def details(self, step: int) -> dict:
        return {"step": step, "attempts": self.attempts, "faults": dict(self.faults),
                "safety_blocks": self.safety_blocks, "safety_reasons": self.safety_reasons,
                "cost_usd": round(self.cost, 6)}


class ServiceEditor(Editor):
    """A paid API editor: subclasses write `_call` (one service call for one seed) and `_metadata`
    (the record's fields from an "ok" Call); `connect` builds their client.

    Options: model, base_url, timeout_s [180] per request, max_attempts [6] calls per step for
    transient faults, safety_retries [3] new-seed retries after safety refusals, backoff_s [2]
    first backoff (doubles per retry, with jitter), backoff_max_s [60], retry_after_max_s [600],
    api_key (default: read from `key_env`), client (for tests), sleep (for tests).
    """

    metered = True
    default_model: str = ""
    key_env: tuple[str, ...] = ()  # environment variables holding the key, in order
    key_url: str = ""  # where a user gets a key (for the missing-key message)

    def __init__(self, model: str | None = None, *, base_url: str | None = None, timeout_s: float = TIMEOUT_S,
                 max_attempts: int = MAX_ATTEMPTS, safety_retries: int = SAFETY_RETRIES, backoff_s: float = 2.0,
                 backoff_max_s: float = 60.0, retry_after_max_s: float = 600.0, api_key: str | None = None,
                 client=None, sleep=time.sleep, seed_rng: random.Random | None = None):
        cls = type(self).__name__
        model = self.default_model if model is None else model
        if not model or not isinstance(model, str):
            raise ValueError(f"{cls}: model must be a model id, got {model!r}")
        if int(max_attempts) < 1 or int(safety_retries) < 0:
            raise ValueError(f"{cls}: max_attempts must be >= 1 and safety_retries >= 0")
        if not timeout_s > 0:
            raise ValueError(f"{cls}: timeout_s must be > 0, got {timeout_s!r}")
        self.model = model
        self.base_url = base_url
        self.timeout_s = float(timeout_s)
        self.max_attempts = int(max_attempts)
        self.safety_retries = int(safety_retries)
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self.retry_after_max_s = float(retry_after_max_s)
        self._api_key = api_key
        self._client = client
        self._client_lock = threading.Lock()
        self._sleep = sleep
        self._jitter = seed_rng or random.Random()
        self._redact = redactor([*(os.environ.get(k) for k in self.key_env), api_key])

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r}, timeout_s={self.timeout_s})"

    def api_key(self) -> str:
        """The key, from the option or the environment; RunStopped (before any work) without one."""
        for value in (self._api_key, *(os.environ.get(k) for k in self.key_env)):
            if value:
                return value
        raise RunStopped(f"no API key: set {' or '.join(self.key_env)} to a {self.name} API key ({self.key_url})")

    # -- one step ------------------------------------------------------------------------------

    def edit(self, request: EditRequest) -> EditResult:
        try:
            return self._edit(request)
        except EditError:
            raise
        except Exception as e:  # noqa: BLE001 - nothing unscrubbed leaves this editor
            raise EditError(f"{self.name} editor: {type(e).__name__}: {self._redact(e)}") from None

    def _edit(self, request: EditRequest) -> EditResult:
        """Prepare the step (`_prepare`), then `run_calls` with it."""
        client = self.connect()
        config = dict(request.config or {})
        self.check_config(config)
        prepared = self._prepare(client, request, config)
        estimate = self.estimate_usd(config, history_images=self._history_images(request))
        return self.run_calls(request, estimate[1] if estimate else 0.0,
                              lambda seed: self._call(client, prepared, request, config, seed))

    def _history_images(self, request: EditRequest) -> int:
        """Earlier images a same-chat request carries, for its price (0 in different-chat mode)."""
        return 0

    def _prepare(self, client, request: EditRequest, config: dict):
        """What every call of this step sends, built once (e.g. the encoded image)."""
        return None

    def _call(self, client, prepared, request: EditRequest, config: dict, seed: int) -> Call:
        """One service call with `seed` (int32): its Call. Must not raise for a service fault."""
        raise NotImplementedError

    def _metadata(self, call: Call, request: EditRequest) -> dict:
        """The record's fields (see banana100.schema) from an "ok" Call, besides those run_calls fills."""
        return {}

    def run_calls(self, request: EditRequest, reserve: float, call) -> EditResult:
        """Call `call(seed)` until an image comes back, under the rules of the module doc."""
        tally = _Tally()
        while True:
            seed = api_seed(request.seed, tally.content_retries)
            tally.attempts += 1
            got, latency = self._metered(request, reserve, seed, tally.attempts, call)
            tally.cost += got.cost if got.cost is not None else reserve
            if got.kind == "ok":
                return self._result(got, request, seed, tally, latency)
            tally.faults[got.outcome] += 1
            self._after_fault(got, request, tally)

    def _metered(self, request: EditRequest, reserve: float, seed: int, attempt: int, call) -> tuple[Call, float]:
        meter = request.meter
        ticket = None
        if meter is not None:
            ticket = meter.start(reserve, chain_id=request.chain_id, step=request.step, attempt=attempt, seed=seed,
                                 model=self.model)
        t0 = time.perf_counter()
        try:
            got = call(seed)
        except BaseException:
            if meter is not None:  # an unexpected error: the call may have been billed
                meter.end(ticket, None, "error", latency_s=round(time.perf_counter() - t0, 4))
            raise
        latency = time.perf_counter() - t0
        if meter is not None:
            meter.end(ticket, got.cost, got.outcome, latency_s=round(latency, 4), seed=seed,
                      finish_reason=got.finish_reason)
        return got, latency

    def _after_fault(self, got: Call, request: EditRequest, tally: _Tally) -> None:
        """Raise when the step cannot go on; else wait (or draw a new seed) for the next call."""
        if got.kind == "fatal":
            raise RunStopped(f"{self.name}: {got.detail} (model {self.model!r}); no chain can go on")
        if got.kind == "refused":
            raise EditError(f"{self.name}: {got.detail}; not retried")
        if got.kind == "stop":
            raise ChainStopped(f"{self.name}: {got.detail}", dict(tally.details(request.step), reason=got.outcome))
        if got.kind == "safety":
            tally.safety_blocks += 1
            tally.safety_reasons.append(got.safety_reason or "unknown")
            if tally.safety_blocks > self.safety_retries:
                raise ChainStopped(
                    f"step {request.step} blocked for safety {tally.safety_blocks} times "
                    f"({', '.join(tally.safety_reasons)}); chain stopped",
                    dict(tally.details(request.step), reason="safety", last_reason=tally.safety_reasons[-1]),
                )
            tally.content_retries += 1
            return
        tally.transient += 1
        if tally.transient >= self.max_attempts:
            raise EditError(
                f"{self.name}: step {request.step} failed after {tally.attempts} calls "
                f"(faults: {json.dumps(dict(tally.faults), sort_keys=True)}); last: {got.detail}"
            )
        if got.kind == "content":
            tally.content_retries += 1
            return
        if got.wait is not None:
            self._sleep(min(got.wait, self.retry_after_max_s) + self._jitter.uniform(0, min(1.0, self.backoff_s)))
        else:
            self._sleep(self._backoff(tally.transient))

    def _backoff(self, n: int) -> float:
        base = min(self.backoff_max_s, self.backoff_s * (2 ** max(n - 1, 0)))
        return base / 2 + self._jitter.uniform(0, base / 2)  # "equal jitter"

    def _result(self, got: Call, request: EditRequest, seed: int, tally: _Tally, latency: float) -> EditResult:
        res = got.result
        metadata = {
            "latency_s": round(latency, 6),
            "finish_reason": got.finish_reason,
            "attempts": tally.attempts,
            "safety_blocks": tally.safety_blocks,
            "cost_usd": round(tally.cost, 8) if self.price is not None else None,
            **self._metadata(got, request),  # may add the editor's own `info`
        }
        info = {"faults": dict(tally.faults), "mime_type": res.get("mime"), "step_seed": int(request.seed),
                **res.get("info", {})}
        metadata["editor_info"] = json.dumps(info, sort_keys=True, default=str)
        return EditResult(image=res["rgb"], metadata=metadata, image_bytes=res["data"], seed=seed,
                          turn=res.get("turn") if request.history is not None else None)
