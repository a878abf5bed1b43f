"""The driver: list, batch, run, merge; lost batches retried file by file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice

from triage.commands.fleet.board import Tally
from triage.commands.fleet.runners import Batch, runner_for
from triage.commands.fleet.source import LogFile, list_source
from triage.commands.fleet.worker import Job, catalogue


@dataclass
class FleetOptions:
    ray: str | None = None  # None: the local process pool; "local", "auto" or an address
    since: datetime | None = None
    jobs: int = 0  # local pool processes (0: one per core); with --ray local, Ray's CPUs
    batch: int = 32  # logs per task
    catalogue_dirs: list[str] = field(default_factory=list)
    prefer_hyperscan: bool = True
    cache: bool = False  # the driver's catalogue through the on-disk cache (the CLI's choice, as for analyze)


def batches(files: Iterator[LogFile], size: int) -> Iterator[Batch]:
    while True:
        b = list(islice(files, size))
        if not b:
            return
        yield b


def run_fleet(source: str, opts: FleetOptions) -> Tally:
    """The leaderboard's aggregates for every log of SOURCE."""
    job = Job(tuple(opts.catalogue_dirs), opts.since, opts.prefer_hyperscan)
    # loaded afresh for every run (a second run in one process sees an edited catalogue), once,
    # before any worker starts: a broken catalogue fails here, and a forked pool inherits it
    catalogue(job.catalogue_dirs, fresh=True, cache=opts.cache)
    files = list_source(source)
    first = next(files)  # a source without files is an error before Ray or a pool is started
    total = Tally()
    lost: list[LogFile] = []
    runner = runner_for(opts.ray, opts.jobs)
    try:
        for batch, result in runner.map(batches(_chain(first, files), max(1, opts.batch)), job):
            if isinstance(result, Tally):
                total.merge(result)
            else:
                lost.extend(batch)
        # the one retry of a lost batch: each of its files alone, so that a file that kills
        # its worker takes no other file down with it
        for batch, result in runner.retry(iter(lost), job):
            if isinstance(result, Tally):
                total.merge(result)
            else:
                total.fail(batch[0].path, f"not analysed, twice: {result}")
    finally:
        runner.close()
    return total


def _chain(first: LogFile, rest: Iterator[LogFile]) -> Iterator[LogFile]:
    yield first
    yield from rest
