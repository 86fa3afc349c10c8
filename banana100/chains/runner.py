"""The chain runner: source images x repeats -> chains of edits, written to a run folder.

`generate_chains` plans the run (`banana100.chains.plan`), makes each step
(`banana100.chains.step`) and writes it to the run folder (`banana100.chains.store`, which
also describes the folder). Chains run concurrently (`concurrency` at once, in threads); the
steps of one chain run in order, each fed the previous step's image. Every step's seed is
derived from the base seed, the chain id and the step (`step.step_seed`), so a chain is the
same whether it ran in one go or was interrupted and resumed: rerunning the same command
resumes every chain after its last recorded step. Writes are pipelined (see `_Run.run_chain`),
in order per chain.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from banana100.chains.batching import BatchGate
from banana100.chains.budget import CALLS_FILE, CallMeter
from banana100.chains.chat import rebuild_history, write_turn
from banana100.chains.editors.base import Editor
from banana100.chains.manifest import MANIFEST_NAME, read_manifest
from banana100.chains.plan import (
    ChainPlan,
    check_arguments,
    check_chat_modes,
    collect_sources,
    dry_run_text,
    plan_chains,
)
from banana100.chains.settings import Setting, get_setting
from banana100.chains.step import edit_request, make_step, step_record
from banana100.chains.store import (
    STOPPED_FILE,
    ProcessLocks,
    RunLock,
    RunStore,
    check_run_file,
    check_run_parameters,
    check_unrecorded_images,
    clear_stopped,
    image_rel,
    read_stopped,
    run_parameters,
)
from banana100.distributed import Processes
from banana100.errors import ChainsFailedError, ChainStopped, RunStopped, UsageError
from banana100.imageio import encode_png, load_rgb

log = logging.getLogger(__name__)


@dataclass
class RunSummary:
    run_dir: Path
    editor: str
    model: str
    setting: str
    steps: int  # edit steps per chain (images per chain: steps + 1)
    chains: int
    written: int  # images (records) written by this run
    already_present: int  # images (records) found from earlier runs, within steps 0..steps
    chains_complete: int
    chains_failed: int
    wall_s: float
    chains_stopped: int = 0  # stopped by the editor (see stopped.jsonl); not retried on rerun
    cost_usd: float | None = None  # estimated spend of the run folder, earlier runs included
    cost_this_run_usd: float | None = None
    stop_reason: str | None = None  # why the run stopped early (cost cap, bad key, ...)
    process: tuple[int, int] | None = None  # (rank, processes) of a distributed run: the counts are this one's

    def __str__(self) -> str:
        lines = [
            f"run folder: {self.run_dir}",
            f"  editor {self.editor} ({self.model}), setting {self.setting}, steps 0-{self.steps}",
            f"  chains: {self.chains} ({self.chains_complete} complete"
            + (f", {self.chains_failed} failed" if self.chains_failed else "")
            + ")",
            f"  images written this run: {self.written}; already present: {self.already_present}",
            f"  wall time: {self.wall_s:.1f} s",
        ]
        if self.process is not None:
            rank, world = self.process
            lines.insert(2, f"  process {rank} of {world}: the counts below are this process's share (one in "
                            f"{world} of the chains still to make)")
        if self.chains_stopped:
            lines.insert(3, f"  chains stopped by the editor: {self.chains_stopped} (reasons in {STOPPED_FILE})")
        if self.cost_usd is not None:
            lines.append(
                f"  estimated cost: ${self.cost_this_run_usd or 0:.2f} this run, ${self.cost_usd:.2f} in this folder "
                f"(calls in {CALLS_FILE}; prices in generation/pricing.yaml)"
            )
        if self.stop_reason:
            lines.append(f"  stopped early: {self.stop_reason}")
        return "\n".join(lines)


class _Run:
    """The chains of one locked run folder, made by worker threads."""

    def __init__(self, editor: Editor, setting: Setting, steps: int, seed: int, run_dir: Path, bar, meter, writers):
        self.editor = editor
        self.setting = setting
        self.steps = steps
        self.seed = seed
        self.run_dir = run_dir
        self.bar = bar
        self.meter = meter
        self.writers = writers  # a thread pool for the pipelined writes (see run_chain)
        self.store = RunStore(run_dir, on_written=self._count)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.written = 0
        self.failures: dict[str, tuple[int, BaseException]] = {}
        self.stopped: dict[str, dict] = {}  # chain_id -> stop record, this run
        self.stop_reason: str | None = None
        self.stop_error: RunStopped | None = None

    def _count(self) -> None:
        with self.lock:
            self.written += 1
            self.bar.update(1)

    def _write(self, plan: ChainPlan, record: dict, data: bytes, turn: list | None = None) -> None:
        if turn is not None:  # same-chat: the model's turn is on disk before the step's record, which keeps its hash
            record["turn_sha256"] = write_turn(self.run_dir / plan.chain_id, record["step"], turn, data)
        self.store.write(record, data)
        plan.advance(self.run_dir, record)

    def _record(self, plan: ChainPlan, step: int, data: bytes, rgb, parent: str | None, **fields) -> dict:
        return step_record(self.editor, self.setting, plan.chain_id, plan.source.source_id, plan.repeat, step,
                           image_rel(plan.chain_id, step), data, rgb, parent, chat_mode=plan.chat_mode, **fields)

    def run_chain(self, plan: ChainPlan) -> None:
        """Make the chain's missing steps, in order.

        Writing is pipelined: as soon as step k's answer is in memory (and validated by the
        editor) the call for step k+1 starts, while a background writer puts step k on disk
        (image, fsync, rename, then its manifest line). The writes of one chain stay in order
        (step k+1 is written only after step k's record is in the manifest), so a crash at any
        moment leaves a contiguous chain; a step whose write had not finished is simply made
        again, since its result never reached the disk.
        """
        self.store.prepare_chain(plan.chain_id, plan.next_step)
        if plan.next_step == 0:
            if self.stop.is_set():
                return
            current = load_rgb(plan.source.path)
            current_bytes = encode_png(current)
            self._write(plan, self._record(plan, 0, current_bytes, current, None), current_bytes)
        else:
            current_bytes = plan.last_image.read_bytes()  # verified against its sha256 while planning
            current = load_rgb(current_bytes)
        while plan.next_step <= self.steps:  # a step on disk whose record missed the manifest
            adopted = self.store.adopt(plan.chain_id, plan.next_step, plan.parent_sha256)
            if adopted is None:
                break
            record, current_bytes = adopted
            plan.advance(self.run_dir, record)
            current = load_rgb(current_bytes)
        k, parent = plan.next_step, plan.parent_sha256
        # same-chat: the conversation so far, replayed from the stored turns (banana100.chains.chat)
        history = source_png = None
        if plan.chat_mode == "same":
            source_png = (self.run_dir / plan.records[0]["image"]).read_bytes()
            history = rebuild_history(self.run_dir, plan.records, source_png)
        writing = None  # the future of the step being written
        try:
            while k <= self.steps:
                if self.stop.is_set():
                    return
                request = edit_request(self.setting, k, current, self.seed, plan.chain_id, current_bytes, self.meter,
                                       history=None if history is None else list(history), source_png=source_png)
                out = make_step(self.editor, request)
                if history is not None:
                    history.append({"user": request.user_turn, "model": out.turn})
                current, current_bytes = out.rgb, out.data
                record = self._record(plan, k, out.data, out.rgb, parent, prompt=request.prompt, seed=out.seed,
                                      **out.fields)
                if writing is not None:
                    writing.result()  # step k-1 is in the manifest before step k is written
                writing = self.writers.submit(self._write, plan, record, out.data, out.turn)
                parent = record["sha256"]
                k += 1
        finally:
            if writing is not None:
                writing.result()

    def worker(self, jobs: queue.Queue[ChainPlan]) -> None:
        gate = self.editor if isinstance(self.editor, BatchGate) else None  # joined in run_all
        try:
            self._work(jobs)
        finally:
            if gate is not None:
                gate.leave()  # the chains still running stop waiting for this one

    def _work(self, jobs: queue.Queue[ChainPlan]) -> None:
        while not self.stop.is_set():
            try:
                plan = jobs.get_nowait()
            except queue.Empty:
                return
            try:
                self.run_chain(plan)
            except ChainStopped as e:  # this chain cannot go on; the others carry on
                entry = self.store.record_stopped(plan.chain_id, plan.next_step, str(e), e.details)
                with self.lock:
                    self.stopped[plan.chain_id] = entry
            except RunStopped as e:  # no chain can go on: stop scheduling, let the others finish
                with self.lock:
                    if self.stop_error is None:
                        self.stop_error = e
                        self.stop_reason = str(e)
                self.stop.set()
            except BaseException as e:  # noqa: BLE001 - one chain's failure must not stop the others
                with self.lock:
                    self.failures[plan.chain_id] = (plan.next_step, e)

    def run_all(self, pending: list[ChainPlan], concurrency: int) -> None:
        """Run the pending chains in `concurrency` threads; on Ctrl-C let the steps in flight finish."""
        jobs: queue.Queue[ChainPlan] = queue.Queue()
        for p in pending:
            jobs.put(p)
        threads = [
            threading.Thread(target=self.worker, args=(jobs,), name=f"banana100-chain-{i}", daemon=True)
            for i in range(min(concurrency, len(pending)))
        ]
        if isinstance(self.editor, BatchGate):
            for _ in threads:  # before any starts, so that the first step's batch waits for all
                self.editor.join()
        for t in threads:
            t.start()
        try:
            _join(threads)
        except KeyboardInterrupt:
            self.stop.set()
            # "\n": the line starts below the terminal's ^C
            log.warning("\ninterrupted: finishing the steps in flight (press Ctrl-C again to abandon them)")
            try:
                _join(threads)
            except KeyboardInterrupt:
                pass  # abandon: daemon threads die with the process; files stay consistent
            raise


def generate_chains(
    editor: Editor,
    sources,
    setting: str | Setting,
    steps: int,
    repeats: int,
    out_dir,
    concurrency: int = 4,
    seed: int = 0,
    progress: bool = True,
    max_cost: float | None = None,
    rpm: float | None = None,
    dry_run: bool = False,
    retry_stopped: bool = False,
    chat: str | list[str] = "different",
) -> RunSummary | str:
    """Make (or resume, or extend) `repeats` chains of `steps` edits per source image.

    `sources` is a folder of images (or a list of image paths); each file's stem is its
    source_id. Every source is decoded before any work starts, and an unreadable one raises
    ImageReadError naming it. `out_dir` is the run folder; rerunning the same call continues
    every chain after its last recorded step (a larger `steps` or `repeats` extends the run; a
    different editor, model, setting, seed or editor option, `Editor.fixed_options` such as the
    diffusers editor's denoising steps, is refused before the editor connects). One chain's error
    does not stop the others: at the end a ChainsFailedError lists the failed chains (their finished steps stay
    recorded; rerun to retry them). On KeyboardInterrupt the run stops scheduling steps, lets
    the steps in flight finish (a second Ctrl-C abandons them) and re-raises.

    Paid editors: every service call is logged in `calls.jsonl` (see banana100.chains.budget);
    `max_cost` (USD, for the whole run folder, earlier runs included) stops the run cleanly
    before a call could take the estimated spend past it, raising BudgetExceeded with the
    summary; `rpm` caps requests per minute across all chains. A chain the editor stops
    (ChainStopped, e.g. repeated safety blocks) is recorded in `stopped.jsonl` and skipped by
    later runs unless `retry_stopped`. `dry_run` returns a description of what would be done
    (chains, steps, estimated cost, prompt schedule, config) and touches nothing.

    `chat` is "different" (the paper's protocol: a fresh request per step), "same" (one
    conversation per chain, for an editor with `supports_chat`; see banana100.chains.chat) or
    both ("different,same"): each mode makes its own chains, with their own ids.
    """
    t_start = time.monotonic()
    setting = setting if isinstance(setting, Setting) else get_setting(setting)
    check_arguments(editor, setting, steps, repeats, concurrency, seed, max_cost, rpm)
    job = _Job(editor, setting, steps, repeats, Path(out_dir), seed, check_chat_modes(editor, chat),
               collect_sources(sources),  # before any work: nothing is written if a source is bad
               sources, concurrency, progress, max_cost, rpm, retry_stopped)
    # a folder made with other fixed parameters is refused now, before a model is loaded (read-only;
    # checked again under the lock below, where run.json is written)
    check_run_parameters(job.run_dir, job.params, job.flags)
    if dry_run:
        return _dry_run(job)

    procs = run_processes(editor, max_cost, rpm)
    editor.connect()  # a missing key fails here, before anything is written
    job.run_dir.mkdir(parents=True, exist_ok=True)
    with RunLock(job.run_dir) if procs.world == 1 else ProcessLocks(job.run_dir, procs.rank):
        planned = _plan_locked(job, procs)
        run, meter, paid = _make_chains(job, planned, procs)
    summary = RunSummary(
        run_dir=job.run_dir, editor=editor.name, model=editor.model, setting=setting.name, steps=steps,
        chains=len(planned.mine), written=run.written, already_present=planned.present,
        chains_complete=sum(1 for p in planned.mine if p.next_step > steps), chains_failed=len(run.failures),
        wall_s=time.monotonic() - t_start, chains_stopped=len(planned.stopped_before) + len(run.stopped),
        cost_usd=meter.spent if paid else None, cost_this_run_usd=(meter.spent - meter.spent_before) if paid else None,
        stop_reason=run.stop_reason, process=(procs.rank, procs.world) if procs.world > 1 else None,
    )
    _raise_failures(run, summary, len(planned.mine))
    return summary


@dataclass
class _Job:
    """What `generate_chains` was asked, checked."""

    editor: Editor
    setting: Setting
    steps: int
    repeats: int
    run_dir: Path
    seed: int
    chat_modes: tuple
    srcs: list
    sources: object  # as given (run.json records a folder)
    concurrency: int
    progress: bool
    max_cost: float | None
    rpm: float | None
    retry_stopped: bool

    @property
    def params(self) -> dict:
        return run_parameters(self.editor, self.setting, self.seed)

    @property
    def flags(self) -> dict:
        return dict(getattr(self.editor, "option_flags", {}) or {})

    def plan(self, records: list[dict]) -> list[ChainPlan]:
        return plan_chains(self.run_dir, self.srcs, self.setting, self.params, self.steps, self.repeats, records,
                           self.chat_modes)


def _dry_run(job: _Job) -> str:
    """What a run would do, touching nothing."""
    run_dir = job.run_dir
    records = read_manifest(run_dir) if (run_dir / MANIFEST_NAME).is_file() else []
    check_unrecorded_images(run_dir, records)
    plans = job.plan(records)
    stopped = {} if job.retry_stopped else read_stopped(run_dir)
    pending = [p for p in plans if p.next_step <= job.steps and p.chain_id not in stopped]
    return dry_run_text(job.editor, job.setting, plans, pending, job.steps, job.seed, run_dir, stopped, job.max_cost)


@dataclass
class _Planned:
    mine: list  # the chains this process answers for
    pending: list  # ... of which those still to make
    stopped_before: dict  # chains stopped by earlier runs
    present: int  # their images already there


def _plan_locked(job: _Job, procs: Processes) -> _Planned:
    """Under the run folder's lock: check the folder, write run.json, plan every chain."""
    run_dir = job.run_dir
    records = read_manifest(run_dir) if (run_dir / MANIFEST_NAME).is_file() else []
    # every process, before run.json is written or anything is asked (read-only: all refuse alike)
    check_unrecorded_images(run_dir, records)
    if procs.rank == 0:  # the folder's parameters and the ledger are set up by one process
        check_run_file(run_dir, job.params, bool(records), job.sources, job.flags)
        if job.retry_stopped:
            clear_stopped(run_dir, read_stopped(run_dir))
    procs.barrier()  # run.json is written before the others read it
    if procs.rank != 0:
        records = read_manifest(run_dir)
        check_run_file(run_dir, job.params, bool(records), job.sources, job.flags)
    plans = job.plan(records)
    stopped_before = read_stopped(run_dir)
    pending = [p for p in plans if p.next_step <= job.steps and p.chain_id not in stopped_before]
    procs.barrier()  # every process has planned from the same manifest before any appends to it
    mine = plans
    if procs.world > 1:  # each chain is made by one process: every n-th chain still to make
        pending = mine = procs.share(sorted(pending, key=lambda p: p.chain_id))
    return _Planned(mine, pending, stopped_before, sum(p.present for p in mine))


def _make_chains(job: _Job, planned: _Planned, procs: Processes) -> tuple[_Run, CallMeter, bool]:
    """Make the pending chains with a progress bar, the call meter and the pipelined writers."""
    editor, setting = job.editor, job.setting
    bar = tqdm(total=len(planned.mine) * (job.steps + 1), initial=planned.present, unit="img",
               desc=f"generate {setting.name}", file=sys.stderr, disable=not job.progress or procs.rank != 0,
               dynamic_ncols=True)
    paid = editor.estimate_usd(dict(setting.config)) is not None  # prices known: a running cost estimate

    def show_cost(m: CallMeter) -> None:
        if paid:
            cap = f"/{m.max_cost:.2f}" if m.max_cost is not None else ""
            bar.set_postfix_str(f"${m.spent:.2f}{cap}", refresh=False)

    meter = CallMeter(job.run_dir / CALLS_FILE if editor.metered else None, max_cost=job.max_cost, rpm=job.rpm,
                      on_change=show_cost)
    if paid:
        show_cost(meter)
    writers = ThreadPoolExecutor(max_workers=max(1, min(job.concurrency, len(planned.pending))),
                                 thread_name_prefix="banana100-write")
    # an editor that takes several images per call gets the same step of several chains at once
    stepper = BatchGate(editor) if getattr(editor, "max_batch", 1) > 1 and job.concurrency > 1 else editor
    run = _Run(stepper, setting, job.steps, job.seed, job.run_dir, bar, meter, writers)
    try:
        run.run_all(planned.pending, job.concurrency)
    finally:
        writers.shutdown(wait=True)
        bar.close()
        run.store.close()
        meter.close()
    return run, meter, paid


def _raise_failures(run: _Run, summary: RunSummary, chains: int) -> None:
    """Chains that failed: ChainsFailedError, saying which a rerun retries (an editor's error) and
    which it cannot help (a file of the run folder that must be restored first); then a stop."""
    if run.failures:
        retry = {c: f for c, f in run.failures.items() if _rerun_helps(f[1])}
        lines = [f"  {cid} at step {step}: {type(e).__name__}: {e}" for cid, (step, e) in sorted(run.failures.items())]
        if len(retry) == len(run.failures):
            advice = "rerun the same command to retry them"
        elif not retry:
            advice = "a rerun cannot help until the files named below are restored"
        else:
            advice = (f"rerun the same command to retry {len(retry)} of them; the others need the files named below "
                      "restored first")
        raise ChainsFailedError(
            f"{len(run.failures)} of {chains} chains failed (their finished steps are recorded; {advice}):\n"
            + "\n".join(lines) + "\n" + str(summary),
            dict(run.failures),
            summary,
        )
    if run.stop_error is not None:
        err = type(run.stop_error)(f"{run.stop_error}\n{summary}")
        err.summary = summary
        raise err


def _rerun_helps(error: BaseException) -> bool:
    """False for a run folder's file that is wrong (missing, replaced): the rerun would meet it again."""
    from banana100.errors import ImageReadError, ManifestError

    return not isinstance(error, (ManifestError, ImageReadError))


def run_processes(editor: Editor, max_cost, rpm) -> Processes:
    """This process's place in a run started by `accelerate launch` or `torchrun` (a lone process
    otherwise); in a distributed run, the editor's GPU is the process's own (cuda:LOCAL_RANK)."""
    procs = Processes(getattr(editor, "device", None))
    if procs.world > 1:
        if editor.metered or max_cost is not None or rpm is not None:
            raise UsageError(
                f"the {editor.name} editor is a paid service: run it in one process (raise --concurrency), since "
                "--max-cost and --rpm count the calls of one process; accelerate launch / torchrun are for editors "
                "on your own GPUs (--editor diffusers)"
            )
        if hasattr(editor, "device"):
            editor.device = procs.device(editor.device)
        log.info("process %d/%d makes one in %d of the chains still to make (by sorted chain id, from #%d)",
                 procs.rank, procs.world, procs.world, procs.rank)
    return procs


def _join(threads: Iterable[threading.Thread]) -> None:
    for t in threads:
        while t.is_alive():
            t.join(0.2)
