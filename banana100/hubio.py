"""Calls to the Hugging Face Hub that upload (`push`, `publish-metrics`): a network that is out, a
refused token or a server error becomes one error naming what was being done and the repository,
never a traceback (an offline `push` printed 75 lines ending in httpx's ConnectError)."""

from __future__ import annotations

import contextlib
import importlib

from banana100.errors import Banana100Error, UsageError


class HubUnreachableError(Banana100Error):
    """The Hub could not be reached (no network, DNS, a proxy, HF_HUB_OFFLINE=1): exit status 1."""


class HubRefusedError(UsageError):
    """The Hub refused the token or the access (401, 403): the usage status, as for a refused API key."""


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The network errors of the HTTP clients huggingface_hub may use (httpx, its 2.x fork httpx2, requests)."""
    kinds = []
    for module, name in (("httpx", "TransportError"), ("httpx2", "TransportError"),
                         ("requests.exceptions", "ConnectionError")):
        try:
            kinds.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(kinds)


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:300] if lines else type(e).__name__


@contextlib.contextmanager
def hub_calls(what: str):
    """Around Hub calls doing `what` ("uploading to the dataset someone/x"): their failures as one line."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        yield
    except OfflineModeIsEnabled:
        raise HubUnreachableError(f"{what}: HF_HUB_OFFLINE=1 is set, so nothing can be sent; unset it and run "
                                  "the command again") from None
    except HfHubHTTPError as e:
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status in (401, 403):
            raise HubRefusedError(f"{what}: the Hub refused the token or the access (HTTP {status}); log in with "
                                  "`hf auth login` (or set HF_TOKEN) with write access to it") from None
        raise HubUnreachableError(f"{what}: the Hub answered HTTP {status}: {_first_line(e)}; run the command "
                                  "again (it resumes)") from None
    except _transport_errors() as e:
        raise HubUnreachableError(f"{what}: the Hub could not be reached ({type(e).__name__}: {_first_line(e)}); "
                                  "check the network and run the command again (it resumes)") from None
