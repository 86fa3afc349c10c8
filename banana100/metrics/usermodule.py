"""A user's evaluate module, run in a process of its own (`ModuleWorker`).

A user's code can do what no `except` catches: `os._exit(0)` in `compute` ended `banana100 score`
with status 0, no file and no message; a `BaseException` came out as a raw traceback; `os.chdir('/')`
moved the command's own current folder, and its relative `--out` was then written elsewhere (or not
at all); a `compute` that never returns hung the run. In a process of its own the module can do none
of that to the command: its exit, its hang (past `timeout` seconds per call: `--timeout-per-batch`),
a BaseException become one error naming the module (`ScoringStopped`, which stops the run and keeps
what was scored before), and its current folder is its own. An ordinary exception of `compute` comes
back as an exception of the same type name and message, for the scorer to isolate image by image.

Cost: one process start and one load of the module (the spawn start method: a fresh interpreter, never a
fork of one holding torch's threads; `evaluate` imports torch there too), and each batch's arrays pickled
through a pipe: about 4 s a command on a loaded 2-core machine (40 images: 9.6 s in the command's
process, 13.8 s in its own; bench/metrics/user_module_cost.py).
"""

from __future__ import annotations

import atexit
import multiprocessing
import threading
import weakref

from banana100.errors import ScoringStopped

#: seconds one call of a user's module (loading it, or `compute` on one batch) may take before the run
#: stops: far above what a model takes on a batch (VisualQuality-R1 on a CPU: about a minute an image,
#: 8 images a batch), low enough that a module that never returns does not hold a run for hours.
DEFAULT_TIMEOUT_S = 1800.0
_timeout = DEFAULT_TIMEOUT_S
_WORKERS: "weakref.WeakSet[ModuleWorker]" = weakref.WeakSet()


def set_timeout(seconds: float | None) -> None:
    """The limit of every call of a user's module from now on (None or 0: no limit); `--timeout-per-batch`."""
    global _timeout
    _timeout = float(seconds) if seconds else float("inf")
    for worker in list(_WORKERS):
        worker.timeout = _timeout


class RaisedInModule(Exception):
    """An ordinary exception of the module's `compute`, brought back from its process: its type's name and its
    message (the feed writes `<image>: <type>: <message>` in the `error` column, as for any scorer)."""


def _raised(type_name: str, message: str) -> Exception:
    """An exception named as the module's was (ValueError stays ValueError in the `error` column)."""
    return type(type_name, (RaisedInModule,), {})(message)


class ModuleWorker:
    """An evaluate module `name` loaded in a process of its own; `compute(images=...)` as the module's, with
    the calls' failures turned into errors naming it (see the module docstring)."""

    def __init__(self, name: str):
        self.name = name
        self.timeout = _timeout
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child, name), daemon=True, name=f"banana100 module {name}")
        self._process.start()
        child.close()
        self._lock = threading.Lock()
        _WORKERS.add(self)
        kind, payload = self._answer("loading it")
        if kind != "ready":
            self.close()
            raise LoadFailed(kind, payload)
        self.info = payload  # {"name": the module's own name}

    def compute(self, *, images) -> dict:
        """The module's `compute(images=images)`, in its process."""
        with self._lock:
            self._send(("compute", images), "compute()")
            kind, payload = self._answer("compute()")
        if kind == "ok":
            return payload
        if kind == "exit":
            raise SystemExit(payload)
        raise _raised(*payload)

    def _send(self, message, doing: str) -> None:
        try:
            self._conn.send(message)
        except (OSError, EOFError):  # the process is gone already
            raise self._gone(doing) from None

    def _answer(self, doing: str):
        if not self._conn.poll(None if self.timeout == float("inf") else self.timeout):
            self.close()
            raise ScoringStopped(
                f"{self.name}: {doing} did not return within {self.timeout:g} s (--timeout-per-batch); the module "
                "was stopped. Raise the limit if it is only slow; the images scored before are kept")
        try:
            kind, payload = self._conn.recv()
        except (EOFError, OSError):
            raise self._gone(doing) from None
        if kind == "fatal":  # a BaseException that is not an Exception (nor SystemExit)
            self.close()
            raise ScoringStopped(f"{self.name}: {doing} raised {payload[0]}: {payload[1]} (a BaseException, which a "
                                 "metric module must not raise); the images scored before are kept")
        return kind, payload

    def _gone(self, doing: str) -> ScoringStopped:
        self._process.join(5)
        code = self._process.exitcode
        self.close()
        how = f"exit status {code}" if code is not None and code >= 0 else f"signal {-code}" if code else "no status"
        return ScoringStopped(f"{self.name}: its process ended during {doing} ({how}: os._exit(), a crash or a kill "
                              "in the module's code); the images scored before are kept")

    def close(self) -> None:
        """Stop the module's process (at once: it may be hung)."""
        _WORKERS.discard(self)
        try:
            self._conn.close()
        except OSError:
            pass
        if self._process.is_alive():
            self._process.kill()
        self._process.join(5)


class LoadFailed(Exception):
    """The module did not load or did not start (`kind`: load-error, exit), with what it said."""

    def __init__(self, kind: str, payload):
        super().__init__(kind)
        self.kind, self.payload = kind, payload


@atexit.register
def _close_all() -> None:
    for worker in list(_WORKERS):
        worker.close()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def _serve(conn, name: str) -> None:
    """In the module's process: load it, then answer each ("compute", images) until the pipe closes."""
    try:
        import evaluate

        module = evaluate.load(name)
    except SystemExit as e:
        conn.send(("exit", e.code))
        return
    except BaseException as e:  # noqa: BLE001 - everything the loading can raise is said, by type
        conn.send(("load-error", (type(e).__name__, _first_line(e))))
        return
    conn.send(("ready", {"name": str(getattr(module, "name", "") or "")}))
    while True:
        try:
            kind, images = conn.recv()
        except (EOFError, OSError):
            return
        try:
            out = module.compute(images=images)
            conn.send(("ok", out))
        except SystemExit as e:
            conn.send(("exit", e.code))
        except Exception as e:  # noqa: BLE001 - brought back as the same type's name and message
            conn.send(("error", (type(e).__name__, _first_line(e))))
        except BaseException as e:  # noqa: BLE001 - a KeyboardInterrupt or a BaseException of its own
            conn.send(("fatal", (type(e).__name__, _first_line(e))))
            return
