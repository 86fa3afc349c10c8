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


@dataclass
class EditResult:
    image: np.ndarray | None  # HxWx3 uint8; None when the editor produced no image
    # Manifest fields the editor can fill (see banana100.schema): finish_reason,
    # thought_summary, input_tokens, output_tokens, attempts, latency_s, editor_info, ...
    metadata: dict = field(default_factory=dict)
    image_bytes: bytes | None = None  # the editor's own encoded bytes, kept as-is when given


class Editor(abc.ABC):
    """An image editor. Implementations must be safe to call from several threads."""

    name: str  # the manifest's `editor`
    model: str  # the manifest's `model`

    @abc.abstractmethod
    def edit(self, request: EditRequest) -> EditResult:
        """Produce the next image of a chain."""
