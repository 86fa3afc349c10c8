"""File helpers every part of the library writes and reads through (base layer: imports only
`errors`): atomic writes with fsync, sha256 of a file, reading a file that must be a regular
file, the one rule for a path that must stay inside a folder, the lock that `generate`, `score`
and `build-dataset` take on what they write, and whole-line appends under flock that several
processes share (a distributed `generate`'s manifest.jsonl).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
from contextlib import contextmanager
from pathlib import Path

from banana100.errors import Banana100Error, ManifestError

_CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of a regular file, read in 1 MiB chunks (a FIFO or device fails at once)."""
    h = hashlib.sha256()
    with open_regular(path) as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def open_regular(path: str | os.PathLike):
    """`path` opened for binary reading, or OSError at once when it is not a regular file.

    Opened non-blocking, so a FIFO (whose plain open waits for a writer forever) is refused
    instead of hanging; the flag is cleared again before reading.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
            raise OSError(errno.EINVAL, f"not a regular file ({kind})", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of a regular file (see `open_regular`)."""
    with open_regular(path) as f:
        return f.read()


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a folder, so that a rename or a new file in it survives a power cut."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # not supported on every platform
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` so that `path` is either absent/old or complete, never half-written.

    Temporary file beside it, fsync, rename, fsync of the folder. On any failure (a full disk)
    the temporary file is removed and the OSError names `path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno is not None:
            raise OSError(e.errno, f"cannot write {path}: {e.strerror}") from None
        raise
    fsync_dir(path.parent)


def is_temporary_name(name: str) -> bool:
    """A temporary file of `write_file_atomic` (a crash leaves one behind)."""
    return name.startswith(".") and ".tmp-" in name


def path_inside(root: str | os.PathLike, rel: str, where: str) -> Path:
    """`root / rel`, refused (ManifestError naming `where`) when it leaves `root`: an absolute
    path, a `..` part, or a symlink (of the file or of a folder on the way) leading out.

    The one rule for the paths a manifest names: `score` and `build-dataset` both read images
    through it (`banana100.chains.manifest.image_path`).
    """
    root = Path(root)
    p = Path(rel)
    if not rel or p.is_absolute() or p.drive or ".." in p.parts:
        raise ManifestError(f"{where}: image path {rel!r} leaves the run folder (absolute or with '..')")
    full = root / p
    real_root = root.resolve()
    real = full.resolve()  # follows every symlink on the way
    if real != real_root and real_root not in real.parents:
        raise ManifestError(f"{where}: image path {rel!r} is a symlink that leads out of the run folder (to {real})")
    return full


class ExclusiveLock:
    """An exclusive, non-blocking lock held through a lock file (flock: released by the OS when
    the process dies, even by SIGKILL). A second holder is refused with one line that names the
    folder or file in use and the command holding it. `remove=True` deletes the lock file on
    release (for a lock beside the user's files rather than inside a folder of ours). `shared=True`
    takes it shared: the processes of one distributed run hold it together, and an exclusive holder
    is refused while any of them runs (and they while it runs).

        with ExclusiveLock(run_dir / ".generate.lock", run_dir, "banana100 generate"):
            ...
    """

    def __init__(self, lock_path: str | os.PathLike, target: str | os.PathLike, command: str,
                 remove: bool = False, shared: bool = False):
        if remove and shared:
            raise ValueError("a shared lock file cannot be removed on release: another holder may still hold it")
        self.path, self.target, self.command, self.remove = Path(lock_path), Path(target), command, remove
        self.shared = shared
        self._fd = None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise Banana100Error(
                    f"{self.target} is in use by another `{self.command}` (lock {self.path}); wait for it to finish "
                    "(or stop it) before running into the same place"
                ) from None
            try:  # a holder that removes its lock file on release may have done so since our open: retry
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return self
            os.close(fd)

    def __exit__(self, *exc):
        if self._fd is not None:
            if self.remove:  # while still holding it, so nobody locks the file being removed
                try:
                    self.path.unlink()
                except OSError:
                    pass
            os.close(self._fd)  # releases the lock
            self._fd = None


@contextmanager
def turn_lock(fd: int):
    """An exclusive flock on an open file, waited for and held for one short write: the processes
    appending to one file (a distributed `generate`) take turns, so their lines never interleave."""
    try:
        import fcntl
    except ImportError:  # not POSIX: one process per run folder, and its threads hold their own lock
        yield
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def drop_partial_tail(fd: int) -> bool:
    """Cut what follows the last newline of an open file; True when something was cut.

    Called under `turn_lock`: a writer holds the lock for its whole line, so a line without its
    newline was left by a writer that died mid-write, and the next line must not be glued to it.
    """
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    os.lseek(fd, size - 1, os.SEEK_SET)
    if os.read(fd, 1) == b"\n":
        return False
    keep, end = 0, size
    while end > 0:
        start = max(0, end - _CHUNK)
        os.lseek(fd, start, os.SEEK_SET)
        chunk = os.read(fd, end - start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            keep = start + cut + 1
            break
        end = start
    os.ftruncate(fd, keep)
    os.fsync(fd)
    return True


def append_locked(fd: int, data: bytes) -> bool:
    """Append `data` (whole lines) to a file opened with O_APPEND, under `turn_lock`, and fsync it.
    A partial last line that a dead writer left is cut first; returns True when one was."""
    with turn_lock(fd):
        cut = drop_partial_tail(fd)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    return cut


def open_for_append(path: str | os.PathLike) -> int:
    """A file descriptor for `append_locked` (read-write: the partial-tail check reads the end)."""
    return os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
