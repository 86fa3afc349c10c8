"""This process's place in a run started by `accelerate launch` or `torchrun`: its rank, the
number of processes, its GPU and a barrier. `score` and `generate` both read it from here.

Each command shares its work out by rank (`Processes.share`): every process computes the same
ordered list of work and keeps every n-th item from its rank on, so the processes need no
messages to agree on who does what.
"""

from __future__ import annotations

import os


class Processes:
    """This process's place in a distributed run (`accelerate launch` or `torchrun`), or a lone one.

    accelerate's PartialState reads the launcher's environment (RANK, WORLD_SIZE, ...); it
    gives the rank, the process count and a barrier. With one process nothing is imported.
    """

    def __init__(self, device: str | None):
        self.rank, self.world, self.local_rank, self._state = 0, 1, 0, None
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            from accelerate import PartialState

            import torch

            cpu = device == "cpu" or (device is None and not torch.cuda.is_available())
            self._state = PartialState(cpu=cpu)
            self.rank, self.world = self._state.process_index, self._state.num_processes
            self.local_rank = self._state.local_process_index

    def device(self, device: str | None) -> str | None:
        """One GPU per process: 'cuda' (or the default) becomes 'cuda:<local rank>'."""
        import torch

        if self.world > 1 and device in (None, "cuda") and torch.cuda.is_available():
            return f"cuda:{self.local_rank}"
        return device

    def barrier(self) -> None:
        if self._state is not None:
            self._state.wait_for_everyone()

    def share(self, items: list) -> list:
        """This process's share of `items` (the same list, in the same order, in every process):
        every `world`-th item from position `rank` on."""
        return items[self.rank::self.world]
