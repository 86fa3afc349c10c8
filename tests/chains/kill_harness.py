"""The SIGKILL harness of the paid editors' tests: run a command, kill it at given points, and
tell which steps are on disk (in the manifest, or adoptable from their side record)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from banana100.chains.manifest import MANIFEST_NAME, read_manifest, sha256_bytes

from fixtures.repopaths import REPO


def on_disk(out: Path) -> set[tuple[str, int]]:
    """(chain, step) whose image is on disk with its record: in the manifest or adoptable."""
    done = {(r["chain_id"], r["step"]) for r in read_manifest(out)}
    for pending in out.glob("*/.step_*.record.json"):
        try:
            rec = json.loads(pending.read_text())
        except ValueError:  # cut short by the kill: not adoptable (the runner ignores it too)
            continue
        img = out / rec["image"]
        if img.is_file() and sha256_bytes(img.read_bytes()) == rec["sha256"]:
            done.add((rec["chain_id"], rec["step"]))
    return done


def kill_after(cmd, env, out: Path, kill_ats, log_path: Path) -> None:
    """Run `cmd` once per count in `kill_ats`, each time SIGKILLed once the manifest holds that
    many lines."""
    for kill_at in kill_ats:
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log)
            deadline = time.monotonic() + 60
            while not (out / MANIFEST_NAME).is_file() or (out / MANIFEST_NAME).read_bytes().count(b"\n") < kill_at:
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.005)
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(30) == -signal.SIGKILL
