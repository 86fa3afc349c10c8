"""What the loopback stand-ins of the editors' services (gemini_standin, image_api_standin) share."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


def request_body(handler: BaseHTTPRequestHandler) -> bytes | None:
    """The request's body, or None when the client went away mid-upload (a kill): fewer bytes came than it
    announced, and a real service never sees such a request. The connection is then closed unanswered."""
    length = int(handler.headers.get("content-length") or 0)
    body = handler.rfile.read(length)
    if len(body) < length:
        handler.close_connection = True
        return None
    return body
