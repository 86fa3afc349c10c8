"""The editor interface: image + instruction + seed -> image + metadata."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

# `Editor.price` of an editor that costs nothing.
FREE = "free"


@dataclass
class EditRequest:
    image: np.ndarray  # HxWx3 uint8, the previous step's output
    prompt: str  # the exact instruction
    seed: int
    config: dict = field(default_factory=dict)  # the setting's generation config
    simulate: dict = field(default_factory=dict)  # the setting's hints for simulated editors
    step: int = 1  # output step being produced (1-based)
    # The previous step's file exactly as stored (PNG), when the runner has it: an editor that
    # sends the image over the wire sends these bytes instead of re-encoding `image`.
    image_bytes: bytes | None = None
    chain_id: str | None = None
    # The run's call meter (banana100.chains.budget.CallMeter) when the runner provides one: a paid
    # editor calls `meter.start(estimate_usd, ...)` before each service call (rate limit and
    # cost cap; raises BudgetExceeded) and `meter.end(ticket, cost_usd, outcome)` after it.
    meter: object | None = None
    # Same-chat mode (banana100.chains.chat): the chain's earlier turns, [{"user": parts, "model":
    # parts}, ...], and this step's user parts; None in the paper's different-chat mode.
    history: list | None = None
    user_turn: list | None = None


@dataclass
class EditResult:
    image: np.ndarray | None  # HxWx3 uint8; None when the editor produced no image
    # Manifest fields the editor can fill (see banana100.schema): finish_reason,
    # thought_summary, input_tokens, output_tokens, attempts, latency_s, editor_info, ...
    metadata: dict = field(default_factory=dict)
    image_bytes: bytes | None = None  # the editor's own encoded bytes, kept as-is when given
    # The seed that actually produced the image, when the editor had to change it (a retry
    # with a new seed after a safety block); None = request.seed.
    seed: int | None = None
    # Same-chat mode: the model's turn as the service returned it (banana100.chains.chat parts),
    # stored beside the image so that the conversation can be replayed.
    turn: list | None = None


class Editor(abc.ABC):
    """An image editor. Implementations must be safe to call from several threads.

    `edit` is the only method an editor must write; the runner calls every hook below, and
    each default suits a free, local editor (the simulated one). A service editor overrides
    `metered`, `price`, `estimate_usd`, `request_config`, `check_config` and `connect`.
    """

    name: str  # the manifest's `editor`
    model: str  # the manifest's `model`
    # True for a service editor: every call it makes is logged in the run's calls.jsonl
    # (banana100.chains.budget) and it reports its spend to `EditRequest.meter`.
    metered: bool = False
    # FREE: the editor costs nothing; None: a paid editor whose prices are unknown (no cost
    # estimate, and --max-cost is refused); else its prices (banana100.chains.pricing.ModelPrice).
    price: object | None = FREE
    # The most requests one `edit_batch` call takes; above 1 the runner batches the same step of
    # several chains (banana100.chains.batching).
    max_batch: int = 1
    # True for an editor that can hold a conversation (same-chat mode, banana100.chains.chat):
    # it sends `EditRequest.history` + `user_turn` and returns `EditResult.turn`.
    supports_chat: bool = False
    # How a user gives each of `fixed_options`' keys on the command line (for messages), e.g.
    # {"num_inference_steps": "--inference-steps"}; a key not here is shown by its name.
    option_flags: ClassVar[dict[str, str]] = {}

    @abc.abstractmethod
    def edit(self, request: EditRequest) -> EditResult:
        """Produce the next image of a chain."""

    def edit_batch(self, requests: list[EditRequest]) -> list[EditResult]:
        """The next image of several chains, in request order; an editor with `max_batch` > 1
        makes them in one call. Each result must be what `edit` gives for that request alone."""
        return [self.edit(r) for r in requests]

    def batch_key(self, request: EditRequest) -> tuple:
        """Requests with equal keys may share one `edit_batch` call (e.g. same image size)."""
        return (request.image.shape, tuple(sorted((k, str(v)) for k, v in request.config.items())))

    def estimate_usd(self, config: dict, history_images: int = 0) -> tuple[float, float] | None:
        """(typical, reserved) USD of one call under the setting's `config`, with
        `history_images` earlier images sent along (same-chat mode); None when the editor is
        free or its prices are unknown (then no running cost is shown)."""
        return None

    def request_config(self, config: dict, seed: int) -> dict:
        """The generation config one call sends, as the dry run shows it: the setting's own."""
        return dict(config)

    def check_config(self, config: dict) -> None:
        """Refuse (raise) a setting config this editor cannot honour, before any work."""

    def fixed_options(self) -> dict:
        """The editor's own options that shape every image, so fixed for a run folder like its
        editor, model, setting and seed: the first run records them in run.json, and a rerun with
        other values is refused before anything is loaded (banana100.chains.store). Plain JSON
        values; None = the editor's (or its model's) default. None here: no such options."""
        return {}

    def connect(self):
        """Get ready to serve calls (a service client; a missing key fails here), before any
        file is written. The runner does not use what it returns."""
