"""The editor interface: image + instruction + seed -> image + metadata."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

import numpy as np



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


class Editor(abc.ABC):
    """An image editor. Implementations must be safe to call from several threads."""

    name: str  # the manifest's `editor`
    model: str  # the manifest's `model`

    @abc.abstractmethod
    def edit(self, request: EditRequest) -> EditResult:
        """Produce the next image of a chain."""
