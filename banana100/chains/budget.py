"""The call meter: every paid service call of a run, its cost, the cost cap and the rate limit.

A run folder's `calls.jsonl` is the ledger of money: a paid editor writes a `start` line
before each service call (with the amount it reserves) and an `end` line after it (with the
estimated cost of the answer, its outcome and latency). Lines are flushed as they are written,
so they survive a killed process. The money a run folder has spent is the sum of the `end`
costs plus, for a call that started but never ended (the process died mid-call, so the
service may have billed it), its reserved amount. `--max-cost` compares that total, plus what
the calls in flight have reserved, plus the next call's reservation, with the cap, and refuses
the call (BudgetExceeded) rather than go over it.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from banana100.errors import BudgetExceeded
from banana100.chains.manifest import utc_now

CALLS_FILE = "calls.jsonl"


def ledger_totals(path: str | os.PathLike) -> dict:
    """{'spent_usd', 'calls', 'unfinished'} from a calls.jsonl (absent file: zeros)."""
    starts: dict[str, float] = {}
    spent, calls = 0.0, 0
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return {"spent_usd": 0.0, "calls": 0, "unfinished": 0}
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if rec.get("event") == "start":
            starts[rec["id"]] = float(rec.get("reserve_usd") or 0.0)
            calls += 1
        elif rec.get("event") == "end":
            starts.pop(rec.get("id"), None)
            spent += float(rec.get("cost_usd") or 0.0)
    return {"spent_usd": spent + sum(starts.values()), "calls": calls, "unfinished": len(starts)}


class CallMeter:
    """Thread-safe: the ledger, the running cost, the cap and a client-side rate limit."""

    def __init__(
        self,
        ledger: str | os.PathLike | None = None,
        max_cost: float | None = None,
        rpm: float | None = None,
        on_change: Callable[[CallMeter], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if max_cost is not None and not max_cost >= 0:
            raise ValueError(f"max_cost must be >= 0, got {max_cost!r}")
        if rpm is not None and not rpm > 0:
            raise ValueError(f"the rate limit must be > 0 requests per minute, got {rpm!r}")
        self.max_cost = None if max_cost is None else float(max_cost)
        self.interval = 0.0 if not rpm else 60.0 / float(rpm)
        self.on_change = on_change
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next_slot = 0.0
        self.path = Path(ledger) if ledger is not None else None
        totals = ledger_totals(self.path) if self.path is not None else {"spent_usd": 0.0}
        self.spent_before = totals["spent_usd"]  # spent by earlier runs into this folder
        self.spent = self.spent_before  # the folder's total, this run included
        self.reserved = 0.0
        self.calls = 0
        self.exhausted = False
        self._file = open(self.path, "a", encoding="utf-8") if self.path is not None else None

    def _write(self, record: dict) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record, sort_keys=True) + "\n")
            self._file.flush()  # survives a killed process (the page cache keeps it)

    def start(
        self, reserve_usd: float, *, chain_id=None, step=None, attempt=None, seed=None, model=None
    ) -> dict:
        """Before a service call: check the cap, reserve, wait for the rate limit, log."""
        reserve_usd = float(reserve_usd or 0.0)
        with self._lock:
            if self.max_cost is not None and self.spent + self.reserved + reserve_usd > self.max_cost + 1e-9:
                self.exhausted = True
                raise BudgetExceeded(
                    f"cost cap reached: the next call (up to ${reserve_usd:.4f}) would take the estimated "
                    f"spend past --max-cost ${self.max_cost:.2f} (spent ${self.spent:.4f}, "
                    f"${self.reserved:.4f} reserved by calls in flight); rerun with a higher --max-cost to go on"
                )
            self.reserved += reserve_usd
            now = time.monotonic()
            slot = max(now, self._next_slot)
            self._next_slot = slot + self.interval
            self.calls += 1
            ticket = {
                "id": uuid.uuid4().hex[:16],
                "reserve_usd": reserve_usd,
                "chain_id": chain_id,
                "step": step,
                "attempt": attempt,
                "seed": seed,
                "model": model,
            }
            self._write({"event": "start", **ticket, "time": utc_now()})
        if slot > now:
            self._sleep(slot - now)
        return ticket

    def end(self, ticket: dict, cost_usd: float | None, outcome: str, **info) -> float:
        """After a call: settle its cost (None = unknown: charge the reservation), log it."""
        cost = ticket["reserve_usd"] if cost_usd is None else float(cost_usd)
        with self._lock:
            self.reserved -= ticket["reserve_usd"]
            self.spent += cost
            self._write(
                {
                    "event": "end",
                    "id": ticket["id"],
                    "chain_id": ticket["chain_id"],
                    "step": ticket["step"],
                    "attempt": ticket["attempt"],
                    "outcome": outcome,
                    "cost_usd": round(cost, 8),
                    "cost_known": cost_usd is not None,
                    **info,
                    "time": utc_now(),
                }
            )
        if self.on_change is not None:
            self.on_change(self)
        return cost

    def close(self) -> None:
        if self._file is not None:
            with self._lock:
                self._file.close()
                self._file = None
