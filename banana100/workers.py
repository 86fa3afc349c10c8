"""Worker processes that die with their parent (base layer: imports only `errors`).

A `concurrent.futures.ProcessPoolExecutor` worker waits on a queue whose other end it holds
itself, so when the parent is killed (SIGKILL, the OOM killer) the workers wait for ever, each
holding its memory. `process_pool` gives every worker two ways out: on Linux the kernel kills it
when its parent dies (PR_SET_PDEATHSIG), and everywhere a watchdog thread exits it once its
parent process is gone (the parent id changes when the worker is re-parented).
"""

from __future__ import annotations

import os
import signal
import threading
import time

PARENT_POLL_S = 0.5  # how often a worker's watchdog looks for its parent


def _watch_parent(parent_pid: int) -> None:
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)  # the parent is gone: nobody will collect what this worker computes
        time.sleep(PARENT_POLL_S)


def die_with_parent(parent_pid: int) -> None:
    """Make this process exit when `parent_pid` dies (a pool's initializer)."""
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the watchdog alone
        pass
    if os.getppid() != parent_pid:  # died before the line above
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="banana100-parent-watch", daemon=True).start()


def process_pool(workers: int):
    """A ProcessPoolExecutor of `workers` processes (the platform's default start method, as
    `datasets` uses for num_proc) whose workers die with this process."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(), initializer=die_with_parent,
                               initargs=(os.getpid(),))
