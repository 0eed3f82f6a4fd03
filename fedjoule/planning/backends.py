"""Where a sweep's runs execute: a local process pool, or Ray tasks on a local or remote cluster.

Both call `execute` on the same `Job`s with the same torch thread count, so the same seeds
give the same numbers on either backend (floating-point sums depend on the thread count).
"""

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import fedjoule
from fedjoule.errors import FedjouleError, RunDiverged
from fedjoule.plugins import allow_plugins
from fedjoule.scenarios.schema import Scenario
from fedjoule.threads import torch_threads


@dataclass(frozen=True)
class Job:
    """One run for a worker: its folder, the resolved scenario (as data) or resume."""

    name: str
    folder: str
    scenario: dict | None  # None: resume the run in `folder`
    threads: int
    device: str = "cpu"
    data_dir: str | None = None
    allowed: dict | None = None  # plugins.Allowance as data: what plug-ins the run may use
    tracking: dict | None = None  # the parent tracked run's context (tracking/session.py)


# called with (job, summary, None) when a run ends, or (job, None, error) when it failed
OnDone = Callable[[Job, dict | None, BaseException | None], None]


def init_worker(threads: int) -> None:
    """A pool worker's start (a spawned process): OpenMP/MKL limited to `threads` threads,
    and so torch, which reads them when `execute` imports it (and sets the job's own)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def execute(job: Job) -> dict:
    """Run (or resume) one run of a sweep in this process; returns its summary.json content."""
    with torch_threads(job.threads), allow_plugins(**(job.allowed or {})):
        return _execute(job)


def _execute(job: Job) -> dict:
    from fedjoule.simulator.run import run_scenario  # deferred: torch (the run itself)

    try:
        if job.scenario is None:
            _, summary = run_scenario(
                None,
                job.folder,
                data_dir=job.data_dir,
                device=job.device,
                resume=True,
                tracking_parent=job.tracking,
            )
        else:
            scenario = Scenario.model_validate(job.scenario)
            _, summary = run_scenario(
                scenario,
                job.folder,
                data_dir=job.data_dir,
                device=job.device,
                tracking_parent=job.tracking,
            )
    except RunDiverged:  # a result of the grid point, not a failure: its summary says so
        summary = json.loads((Path(job.folder) / "summary.json").read_text())
    return summary


def default_workers(threads: int) -> int:
    """As many runs at once as the machine has cores for, `threads` cores each."""
    return max(1, (os.cpu_count() or 1) // threads)


def run_local(jobs: list[Job], workers: int | None, on_done: OnDone) -> None:
    """A pool of `workers` processes (default: cores // threads per run); one worker runs the
    jobs in this process, without start-up cost."""
    if not jobs:
        return
    workers = min(workers or default_workers(jobs[0].threads), len(jobs))
    if workers == 1:
        for job in jobs:
            try:
                summary = execute(job)
            except Exception as exc:  # one failed run does not stop the sweep
                on_done(job, None, exc)
            else:
                on_done(job, summary, None)
        return
    # spawn, not fork: a forked copy of a process that already ran torch can deadlock
    pool = ProcessPoolExecutor(
        workers,
        mp_context=get_context("spawn"),
        initializer=init_worker,
        initargs=(jobs[0].threads,),
    )
    try:
        with caller_not_reimported():  # the workers start at the submissions
            futures: dict[Future, Job] = {pool.submit(execute, job): job for job in jobs}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                error = future.exception()
                on_done(futures[future], None if error else future.result(), error)
    except BaseException:  # Ctrl-C, SIGTERM: stop the runs in flight and the queued ones
        stop_workers(pool)
        raise
    pool.shutdown()


@contextmanager
def caller_not_reimported() -> Iterator[None]:
    """Spawned workers that do not import the caller's main module. Python's spawn runs
    the main script again in every worker (as `__mp_main__`), so a script calling
    `fedjoule.sweep` at its top level, without `if __name__ == "__main__":`, would start
    the sweep again in each worker, which fails them all. The workers run fedjoule's own
    `execute` on plain data and never need the caller's module: while they start, the
    main module shows neither a path nor a module name to spawn (as in an interactive
    session, where spawn imports nothing either)."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    names = [k for k in ("__file__", "__spec__") if k in main.__dict__]
    hidden = {k: main.__dict__.pop(k) for k in names}
    main.__spec__ = None  # spawn reads it, so it must exist
    try:
        yield
    finally:
        del main.__spec__
        main.__dict__.update(hidden)


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """Kill a pool's worker processes and drop its queue. Safe for runs: a run folder
    survives a kill at any instant, and a restart resumes it."""
    for process in list((pool._processes or {}).values()):  # no public API before 3.14
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def worker_environment() -> dict:
    """Ray's runtime environment for the workers: the folder this fedjoule is installed
    from first on their PYTHONPATH, so that they import it (not a folder named fedjoule in
    the working folder Ray starts them in, such as a checkout's)."""
    installed = str(Path(fedjoule.__file__).resolve().parent.parent)
    paths = [installed, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}}


def run_ray(jobs: list[Job], address: str | None, workers: int | None, on_done: OnDone) -> dict:
    """Ray tasks, `threads` CPUs each (and one GPU when the run's device is CUDA); a local
    Ray is started when no address is given. Ray is shut down at the end. Returns facts
    about the cluster (for sweep.json)."""
    try:
        import ray  # deferred: Ray (optional, --backend ray)
    except ImportError:
        raise FedjouleError(
            "--backend ray needs Ray: pip install 'fedjoule[ray]' (or use --backend local)"
        ) from None
    if not jobs:
        return {}

    tic = time.perf_counter()
    env = {"runtime_env": worker_environment()}
    if address:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR", **env)
    else:
        ray.init(
            num_cpus=os.cpu_count() or 1,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
            **env,
        )
    info = {"ray_start_s": time.perf_counter() - tic}
    try:
        resources = ray.cluster_resources()
        info["cluster_cpus"] = resources.get("CPU", 0)
        info["cluster_gpus"] = resources.get("GPU", 0)
        device = jobs[0].device
        gpus = 1 if device == "cuda" or (device == "auto" and info["cluster_gpus"] >= 1) else 0
        task = ray.remote(execute)
        queue, pending = list(jobs), {}
        limit = workers or len(jobs)
        while queue or pending:
            while queue and len(pending) < limit:
                job = queue.pop(0)
                ref = task.options(num_cpus=job.threads, num_gpus=gpus, name=job.name).remote(job)
                pending[ref] = job
            try:
                done, _ = ray.wait(list(pending), num_returns=1)
            except BaseException:  # Ctrl-C, SIGTERM: cancel what runs (folders survive it)
                for ref in pending:
                    ray.cancel(ref, force=True)
                raise
            for ref in done:
                job = pending.pop(ref)
                try:
                    summary = ray.get(ref)
                except Exception as exc:
                    on_done(job, None, getattr(exc, "cause", None) or exc)
                else:
                    on_done(job, summary, None)
    finally:
        ray.shutdown()
    return info
