"""Batching across chains: the same step of several chains in one editor call.

The runner makes chains in worker threads, one chain per thread, each step waiting for the
previous one. An editor that can take several images per call (`Editor.max_batch` > 1, with
`edit_batch`) is wrapped in a `BatchGate`: each thread hands its request to the gate and waits;
when every thread still working is waiting (or `max_batch` requests are waiting), the last one
to arrive takes the waiting requests that can share a call (`Editor.batch_key`), makes the call
for all of them and hands each thread its own result. No timer decides anything: a batch
forms when no other request can come, so the chains advance step by step together.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from banana100.chains.editors.base import Editor, EditRequest, EditResult


@dataclass(eq=False)
class _Slot:
    request: EditRequest
    key: tuple
    result: EditResult | None = None
    error: BaseException | None = None
    done: bool = False
    taken: bool = field(default=False)


class BatchGate(Editor):
    """An editor that gathers concurrent `edit` calls into `editor.edit_batch` calls.

    Each worker thread calls `join()` when it starts and `leave()` when it stops asking for edits
    (the runner's workers do both); only threads that joined count as requests still to come.
    """

    def __init__(self, editor: Editor):
        self.editor = editor
        self.name = editor.name
        self.model = editor.model
        self.metered = editor.metered
        self.price = editor.price
        self.max_batch = max(1, int(getattr(editor, "max_batch", 1)))
        self._cond = threading.Condition()
        self._members = 0
        self._waiting: list[_Slot] = []
        self.calls = 0  # editor calls made, and the requests they carried (for the bench and tests)
        self.requests = 0

    def join(self) -> None:
        with self._cond:
            self._members += 1

    def leave(self) -> None:
        with self._cond:
            self._members -= 1
            self._cond.notify_all()  # the ones still waiting may now be all there is

    def edit(self, request: EditRequest) -> EditResult:
        slot = _Slot(request, self.editor.batch_key(request))
        with self._cond:
            self._waiting.append(slot)
            self._cond.notify_all()
            while not slot.done:
                if not slot.taken and self._ready():
                    batch = self._take(slot)
                    break
                self._cond.wait()
            else:
                return self._outcome(slot)
        self._run(batch)
        return self._outcome(slot)

    def _ready(self) -> bool:
        return len(self._waiting) >= min(self.max_batch, max(1, self._members))

    def _take(self, mine: _Slot) -> list[_Slot]:
        """The waiting requests that share a call with `mine` (up to max_batch), oldest first."""
        batch = [s for s in self._waiting if s.key == mine.key][: self.max_batch]
        if mine not in batch:
            batch[-1] = mine
        for s in batch:
            s.taken = True
            self._waiting.remove(s)
        return batch

    def _run(self, batch: list[_Slot]) -> None:
        try:
            results = self.editor.edit_batch([s.request for s in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"{self.editor.name}: edit_batch returned {len(results)} results for {len(batch)}")
        except BaseException as e:  # noqa: BLE001 - every chain of the batch gets the error
            results, error = [None] * len(batch), e
        else:
            error = None
        with self._cond:
            self.calls += 1
            self.requests += len(batch)
            for s, r in zip(batch, results, strict=True):
                s.result, s.error, s.done = r, error, True
            self._cond.notify_all()

    @staticmethod
    def _outcome(slot: _Slot) -> EditResult:
        if slot.error is not None:
            raise slot.error
        return slot.result  # type: ignore[return-value]

    # the rest of the contract is the wrapped editor's
    def estimate_usd(self, config: dict, history_images: int = 0):
        return self.editor.estimate_usd(config, history_images)

    def request_config(self, config: dict, seed: int) -> dict:
        return self.editor.request_config(config, seed)

    def check_config(self, config: dict) -> None:
        self.editor.check_config(config)

    def connect(self):
        return self.editor.connect()
