"""Where the batches run: the local process pool (default) or Ray tasks (`--ray`).

Both take batches from the lazy listing as workers free up, with a bounded number in flight,
so neither the file list nor per-log reports pile up in the driver. Each yields, per batch,
its Tally or why the batch was lost (a worker process that died, a failed task); the driver
(`run.py`) gives the files of a lost batch one more try each, on their own.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from typing import Any, Protocol

from triage.commands.fleet.board import Tally
from triage.commands.fleet.source import LogFile
from triage.commands.fleet.worker import Job, analyse_batch, describe
from triage.core.errors import TriageError

Batch = list[LogFile]
Outcome = tuple[Batch, "Tally | str"]

# how long a cluster address may take to accept one TCP connection before `--ray ADDRESS` gives up
CONNECT_TIMEOUT = 5.0
RAY_CLIENT_PORT = 10001  # `ray://head` without a port


class Runner(Protocol):
    name: str

    def map(self, batches: Iterator[Batch], job: Job) -> Iterator[Outcome]: ...

    def retry(self, files: Iterator[LogFile], job: Job) -> Iterator[Outcome]:
        """Each file alone, isolated from the others: a file that kills its worker again is
        reported, and takes no other file down with it."""
        ...

    def close(self) -> None: ...


class InProcess:
    """One process (`--jobs 1`): no pool to fork, nothing to die separately."""

    name = "in-process"

    def map(self, batches: Iterator[Batch], job: Job) -> Iterator[Outcome]:
        for b in batches:
            try:
                yield b, analyse_batch(b, job)
            except Exception as e:  # noqa: BLE001 - the batch is retried file by file
                yield b, describe(e)

    def retry(self, files: Iterator[LogFile], job: Job) -> Iterator[Outcome]:
        return self.map(([lf] for lf in files), job)

    def close(self) -> None:
        pass


def _child(send: Any, batch: Batch, job: Job) -> None:
    try:
        send.send(analyse_batch(batch, job))
    except Exception as e:  # noqa: BLE001 - handed to the driver
        send.send(describe(e))
    finally:
        send.close()


class LocalPool:
    """A process pool on this machine, one process per core (`triage analyze DIR`'s pool)."""

    name = "local pool"

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.inflight = 4 * jobs

    def _pool(self) -> Any:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        # fork: workers inherit the driver's loaded catalogue instead of loading their own
        method = "fork" if "fork" in mp.get_all_start_methods() else None
        return ProcessPoolExecutor(self.jobs, mp_context=mp.get_context(method))

    def map(self, batches: Iterator[Batch], job: Job) -> Iterator[Outcome]:
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        pool = self._pool()
        pending: dict[Any, Batch] = {}
        held: Batch | None = None  # refused by a pool that broke before it was handed over
        more = True
        try:
            while True:
                while more and len(pending) < self.inflight:
                    b, held = (held, None) if held is not None else (next(batches, None), None)
                    if b is None:
                        more = False
                        break
                    try:
                        pending[pool.submit(analyse_batch, b, job)] = b
                    except BrokenProcessPool:
                        # a worker died between the last wait and this submit: this batch never
                        # ran, so it goes to the next pool as it is
                        held = b
                        break
                if not pending and held is None:
                    return
                done = wait(pending, return_when=FIRST_COMPLETED)[0] if pending else set()
                broken = held is not None
                for fut in sorted(done, key=lambda f: pending[f][0].path):
                    b = pending.pop(fut)
                    try:
                        yield b, fut.result()
                    except BrokenProcessPool:
                        broken = True
                        yield b, "a worker process died"
                    except Exception as e:  # noqa: BLE001 - the batch is retried file by file
                        yield b, describe(e)
                if broken:
                    # a dead worker breaks the whole pool: what was still in it is lost too
                    # (and retried), and the next batches go to a fresh pool
                    for fut in list(pending):
                        b = pending.pop(fut)
                        try:
                            yield b, fut.result()
                        except Exception:  # noqa: BLE001
                            yield b, "a worker process died"
                    pool.shutdown(wait=True, cancel_futures=True)
                    pool = self._pool()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def retry(self, files: Iterator[LogFile], job: Job) -> Iterator[Outcome]:
        """One process per file, `jobs` at a time: unlike in a pool, a death names its file."""
        import multiprocessing as mp
        from multiprocessing.connection import wait

        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else None)
        running: list[tuple[Any, Any, LogFile]] = []
        more = True
        while True:
            while more and len(running) < self.jobs:
                lf = next(files, None)
                if lf is None:
                    more = False
                    break
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(send, [lf], job), daemon=True)
                proc.start()
                send.close()  # the child's end: EOF here once the child is gone
                running.append((proc, recv, lf))
            if not running:
                return
            ready = set(wait([r for _, r, _ in running]))
            for item in [x for x in running if x[1] in ready]:
                proc, recv, lf = item
                running.remove(item)
                try:
                    result: Tally | str = recv.recv()
                except EOFError:
                    proc.join()
                    result = f"a worker process died (exit code {proc.exitcode})"
                recv.close()
                proc.join()
                yield [lf], result

    def close(self) -> None:
        pass


class RayRunner:
    """Ray tasks: `local` starts a Ray instance on this machine, `auto` joins the cluster this
    machine belongs to, anything else is a cluster address (`ray://head:10001`, `head:6379`).
    A Ray already initialised by the caller (a notebook, a test) is used as it is."""

    name = "ray"

    def __init__(self, address: str, jobs: int = 0) -> None:
        try:
            import ray
        except ImportError:
            raise TriageError("--ray needs Ray: pip install 'triage[ray]'") from None
        self.ray = ray
        self.started = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "logging_level": logging.ERROR, "configure_logging": True}
            # "local" starts a new instance even where RAY_ADDRESS names a cluster
            kwargs["address"] = address
            if address == "local" and jobs:
                kwargs["num_cpus"] = jobs
            reachable(address)
            try:
                ray.init(**kwargs)
            except ConnectionError as e:
                if address == "auto" and not os.environ.get("RAY_ADDRESS"):
                    raise TriageError("--ray auto: no running Ray cluster found on this machine (start one with "
                                      "`ray start --head`, set RAY_ADDRESS, or use --ray local)") from None
                raise TriageError(f"--ray {address}: cannot join Ray ({type(e).__name__}: {e})") from None
            except Exception as e:  # noqa: BLE001 - RuntimeError, ValueError ...
                raise TriageError(f"--ray {address}: cannot start or join Ray ({type(e).__name__}: {e})") from None
            self.started = True
        cpus = int(ray.cluster_resources().get("CPU", 1) or 1)
        self.inflight = 4 * cpus
        # retries are the driver's (one more try per file), the same on both runners
        self.task = ray.remote(num_cpus=1, max_retries=0)(analyse_batch)

    def map(self, batches: Iterator[Batch], job: Job) -> Iterator[Outcome]:
        ray = self.ray
        pending: dict[Any, Batch] = {}
        more = True
        while True:
            while more and len(pending) < self.inflight:
                b = next(batches, None)
                if b is None:
                    more = False
                    break
                pending[self.task.remote(b, job)] = b
            if not pending:
                return
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                b = pending.pop(ref)
                try:
                    yield b, ray.get(ref)
                except Exception as e:  # noqa: BLE001 - RayTaskError, WorkerCrashedError, NodeDiedError ...
                    yield b, f"Ray task failed ({type(e).__name__})"

    def retry(self, files: Iterator[LogFile], job: Job) -> Iterator[Outcome]:
        return self.map(([lf] for lf in files), job)  # a task's failure is its own already

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


def reachable(address: str) -> None:
    """One TCP connection to a cluster address before Ray is asked to join it: ray.init retries
    an address where nothing listens for minutes, printing a warning every few seconds, where
    a wrong address should be one error line. `auto` is checked when RAY_ADDRESS names the
    cluster (Ray reads it then); without it Ray looks for an instance on this machine and
    fails at once."""
    target = os.environ.get("RAY_ADDRESS", "") if address == "auto" else address
    if target in ("", "auto", "local"):
        return
    client = "://" in target
    hostport = target.split("://", 1)[1].split("/", 1)[0] if client else target
    host, sep, port = hostport.rpartition(":")
    if not sep and client:
        host, port = hostport, str(RAY_CLIENT_PORT)
    if not host or not port.isdigit():
        return  # not host:port: Ray's own message says what is wrong with it
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as e:
        why = e.strerror or str(e) or type(e).__name__
        raise TriageError(f"--ray {address}: cannot reach {host}:{port} ({why}); is the Ray head running there?") from None


def runner_for(ray: str | None, jobs: int) -> Runner:
    if ray is not None:
        return RayRunner(ray, jobs)
    jobs = jobs or (os.cpu_count() or 1)
    return InProcess() if jobs == 1 else LocalPool(jobs)
