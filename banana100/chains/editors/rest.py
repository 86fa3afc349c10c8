"""JSON over HTTPS with the standard library, for the API editors that need no SDK (xai, bfl).

`request_json` makes one request and returns (status, headers, body); an HTTP error status is a
return value, not an exception, so the editors classify it (banana100.chains.editors.service);
a timeout, a refused or dropped connection raises, as a client library would.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

USER_AGENT = "banana100"


def request_json(method: str, url: str, headers: dict, body: dict | None, timeout_s: float
                 ) -> tuple[int, dict, object]:
    """(status, lower-case headers, parsed JSON body or the raw bytes when it is not JSON)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"User-Agent": USER_AGENT, "Accept": "application/json",
                                          **({"Content-Type": "application/json"} if data is not None else {}),
                                          **headers})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - the editors' own URLs
            status, raw, got = resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as e:
        status, raw, got = e.code, e.read(), e.headers
    lower = {k.lower(): v for k, v in (got or {}).items()}
    if "json" in (lower.get("content-type") or ""):
        try:
            return status, lower, json.loads(raw or b"null")
        except ValueError:
            pass
    return status, lower, raw


def error_message(body) -> str:
    """The message of an error body, whatever its shape ({"error": {"message"}}, {"error": str}, {"detail"})."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err)
        for key in ("error", "detail", "message", "code"):
            if body.get(key):
                return str(body[key])
    if isinstance(body, (bytes, bytearray)):
        return body[:200].decode("utf-8", "replace")
    return str(body)[:200]
