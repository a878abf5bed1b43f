"""The Report shape handed from the pipeline to the renderers (and to library users).

Field names used by the JSON contract (`failures`, `findings`, `exception`, `message`,
`line`, `ranks`, `fingerprint`, `signature`, `title`, `confidence`, `severity`,
`workarounds` with `id`/`flags`/`remove_flags`/`env`/`cost`, `evidence` with
`line`/`text`) are stable: scripts depend on them. Add fields, never rename.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import computed_field

from triage.core.record import EXCLUDED, Record, hidden


@dataclass(kw_only=True, eq=False, repr=False)
class Evidence(Record):
    """A log line quoted as proof: its number, its text, and its log when several were read."""

    line: int
    text: str
    source: str | None = None


@dataclass(kw_only=True, eq=False, repr=False)
class Frame(Record):
    """One frame of a traceback: file, line, function and the code shown."""

    file: str
    line: int | None = None
    function: str | None = None
    code: str | None = None


@dataclass(kw_only=True, eq=False, repr=False)
class ExceptionInfo(Record):
    """An exception's type name and message, as one link of a chained traceback."""

    exception: str
    message: str = ""


@dataclass(kw_only=True, eq=False, repr=False)
class RaisedAt(Record):
    """Where the engine's (or a library's) released source raises this failure's message: the
    source atlas's site, in the releases it exists in, with the condition that guards it."""

    package: str
    file: str  # the path inside the package, as in the wheel (sglang/srt/...)
    function: str
    line: int | None = None  # in `release`
    release: str | None = None  # the release whose line and link are given
    versions: str = ""  # the releases this site raises the message in ("0.8.0-0.11.2")
    message_versions: str = ""  # the releases any site raises it in (it may have moved files)
    exception: str = ""  # the class raised, AssertionError, or the log level of a logged message
    template: str = ""  # the message with its holes as {}
    condition: str | None = None  # the guard: the enclosing `if` test or the assert's condition
    fields: list[str] = field(default_factory=list)  # config fields the condition or message reads
    flags: list[str] = field(default_factory=list)  # those fields as the engine's flags, and env vars named
    link: str | None = None  # that line at the release's tag
    # True: the log's version is one of `versions`; False: it is not (the message moved or is
    # older/newer than this site); None: the log names no version of this package
    in_version: bool | None = None
    partial: bool = False  # the log shows only the start of the message (cut off)
    # the releases whose source raises it at the line the traceback shows for this file (the
    # log names no version; a frame's line number says which releases the server ran); None
    # when the log gives no such line or no release has the raise there
    line_versions: str | None = None


@dataclass(kw_only=True, eq=False, repr=False)
class Consequence(Record):
    """An error that only followed a failure: it quotes or wraps the failure's message, or only
    says that an engine or worker died after it. Folded into that failure, never a failure of
    its own (it would be counted and titled as a second, unknown one)."""

    exception: str
    message: str = ""
    line: int
    why: str = ""  # "quotes its message" | "reports that the engine or a worker died after it"


@dataclass(kw_only=True, eq=False, repr=False)
class Failure(Record):
    """One distinct failure; the same traceback printed by N ranks is one Failure."""

    kind: str  # traceback | nccl | cuda | segfault | oom-kill | sigquit | engine-fatal | ...
    exception: str
    message: str = ""
    line: int  # where the failure starts (a traceback's header line)
    exception_line: int | None = None  # the line that names the exception
    end_line: int | None = None
    ranks: list[str] = field(default_factory=list)
    first_rank: str | None = None
    fingerprint: str = ""
    cause: ExceptionInfo | None = None
    chain: list[ExceptionInfo] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    raw: list[Evidence] = field(default_factory=list)
    followed_by: list[Evidence] = field(default_factory=list)
    source: str | None = None
    phase: str | None = None
    time: str | None = None  # timestamp of its first line, as the log prints it
    hints: list[Workaround] = field(default_factory=list)  # the engine's own suggestions
    # the optional features on its stack, innermost first (process-level failures only), and
    # the derived workarounds that turn off those that were on
    features: list[FeatureOnStack] = field(default_factory=list)
    switches: list[Workaround] = field(default_factory=list)
    # process-level (the process or engine died of it) or request-level (the server went on
    # serving after it); only process-level failures make `analyze` exit 1
    fatal: bool = True
    severity_reason: str | None = None
    count: int = 1  # how many times this failure was printed (request-level errors repeat)
    last_line: int | None = None  # where it was printed last, when it was printed more than once
    raised_at: list[RaisedAt] = field(default_factory=list)  # the source atlas's sites for its message
    # the errors that followed from this one (wrappers quoting it, "engine core died" reports),
    # folded in: `cause` above is the exception chained inside this one's traceback
    consequences: list[Consequence] = field(default_factory=list)


@dataclass(kw_only=True, eq=False, repr=False)
class Workaround(Record):
    """A change that avoids the failure (flags to add or remove, environment, an action), with what it costs."""

    id: str
    title: str
    flags: list[str] = field(default_factory=list)
    remove_flags: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    action: str | None = None
    cost: str = ""
    # recommended | already-applied | renamed | conflicting | not-applicable (the log contradicts
    # it: another phase, another release, a value the server already runs; `note` says why)
    status: str = "recommended"
    note: str | None = None
    measured_cost: str | None = None
    source: str = "catalogue"  # catalogue | engine-hint | feature-switch
    # feature-switch only: the optional feature turned off, and the stack frame that implicates
    # it ("file:line in function", or the failure's line that names it)
    feature: str | None = None
    frame: str | None = None
    auto: bool | None = None  # feature-switch only: may `run --retry` apply it unattended


@dataclass(kw_only=True, eq=False, repr=False)
class FeatureOnStack(Record):
    """An optional engine feature the failing stack runs through, and whether it was on."""

    feature: str  # the feature map's id
    title: str
    frame: str  # the frame (or line) that implicates it
    state: str  # on | unconfirmed | off | no-switch
    reason: str = ""  # how the state was read (the printed setting), or why nothing is offered


@dataclass(kw_only=True, eq=False, repr=False)
class Debug(Record):
    """What to set to learn more when the workaround does not help (debug environment, a note)."""

    env: list[str] = field(default_factory=list)
    note: str | None = None


@dataclass(kw_only=True, eq=False, repr=False)
class Finding(Record):
    """A catalogue signature that matched: why it matched, what it means, what to do, and the proof."""

    signature: str
    title: str
    confidence: float
    severity: str
    engine: str
    explanation: str = ""
    workarounds: list[Workaround] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    failure: int | None = None  # index into Report.failures
    fixed_in: str | None = None
    fix_pr: str | None = None  # the merged pull request behind fixed_in
    affects: str | None = None
    open_issue: str | None = None  # not fixed upstream yet: the thread that tracks it
    no_upstream_fix: str | None = None  # no upstream fix is coming: why (configuration, hardware ...)
    references: list[str] = field(default_factory=list)
    debug: Debug | None = None
    why: list[str] = field(default_factory=list)
    unlikely: str | None = None
    generic: bool = False  # a wrapper many causes share: the failure is still effectively unknown
    # the signature's defining evidence that this log lacks (its frames, its engine): such a
    # finding never ranks above one whose evidence is complete
    incomplete: str | None = None
    source: str | None = None  # the log it was found in (several logs: `failure` indexes that log's list)


@dataclass(kw_only=True, eq=False, repr=False)
class LoadFigures(Record):
    """The server's load as one of its load lines printed it."""

    line: int
    time: str | None = None
    running: int | None = None
    queued: int | None = None
    token_usage: float | None = None
    throughput: float | None = None
    cuda_graph: bool | None = None


@dataclass(kw_only=True, eq=False, repr=False)
class PhaseSpan(Record):
    """A start-up phase (loading weights, capturing CUDA graphs ...), where it began and how long it took."""

    name: str
    line: int
    time: str | None = None
    seconds: float | None = None  # until the next phase began


@dataclass(kw_only=True, eq=False, repr=False)
class Timeline(Record):
    """What the server was doing and when: start-up milestones, the load, the crash."""

    first_line: int | None = None
    first_time: str | None = None
    weights_loaded: Evidence | None = None
    cuda_graphs: Evidence | None = None
    ready: Evidence | None = None
    ready_seconds: float | None = None
    crash: Evidence | None = None
    crash_time: str | None = None
    last_load: LoadFigures | None = None
    peak_running: LoadFigures | None = None
    phase_at_crash: str | None = None
    prefix_cache: dict[str, float] | None = None
    phases: list[PhaseSpan] = field(default_factory=list)  # the first start, up to ready
    kv_cache_tokens: int | None = None


@dataclass(kw_only=True, eq=False, repr=False)
class Environment(Record):
    """The engine, model, parallelism and settings the log shows."""

    engine: str | None = None
    version: str | None = None
    # with no version in the log: the releases whose source raises the failure's message at the
    # line its traceback shows ("0.6.2-0.6.3"), and that line; advice that needs a release range
    # is checked against them
    versions_by_line: str | None = None
    versions_basis: str | None = None  # "vllm/model_executor/layers/sampler.py:627"
    model: str | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    pp_size: int | None = None
    attention_backend: str | None = None
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    gpu: str | None = None  # the GPU model, when a line names it
    gpu_memory_gib: float | None = None
    gpu_count: int | None = None  # from the parallel sizes, or the highest GPU index seen
    cuda_graph: str | None = None
    prefix_cache: str | None = None
    config_line: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    launch_settings: Annotated[dict[str, Any], EXCLUDED] = hidden(dict)  # from the launch args only
    launch_command: str | None = None
    # the launch arguments rebuilt from the printed configuration, non-default values only and
    # without the program words (recommend stage); kept out of the JSON like launch_settings
    launch_args: Annotated[list[str], EXCLUDED] = hidden(list)


@dataclass(kw_only=True, eq=False, repr=False)
class PhaseDelta(Record):
    """A start-up phase timed against the same phase of the baseline log."""

    name: str
    seconds: float | None = None
    baseline_seconds: float | None = None
    slower: bool = False


@dataclass(kw_only=True, eq=False, repr=False)
class NovelLine(Record):
    """A warning or error line (as a template) the baseline log does not have."""

    template: str
    count: int
    line: int  # first occurrence in this log


@dataclass(kw_only=True, eq=False, repr=False)
class BaselineComparison(Record):
    """This log against a healthy or earlier one of the same server."""

    source: str
    ready_seconds: float | None = None
    baseline_ready_seconds: float | None = None
    slower: bool = False
    phases: list[PhaseDelta] = field(default_factory=list)
    novel: list[NovelLine] = field(default_factory=list)


@dataclass(kw_only=True, eq=False, repr=False)
class HostSource(Record):
    """Another record of the same incident given with `--with` (or found in a bundle directory):
    the kernel log, nvidia-smi, Kubernetes, Slurm."""

    path: str
    # kernel | nvidia-smi-q | nvidia-smi-csv | nvidia-smi-table | kubectl-describe-pod |
    # kubectl-events | pod-json | slurm-output | sacct
    kind: str
    lines: int = 0
    events: int = 0
    # how its clock was put on the server log's: "same clock" / "UTC, the server log is UTC" /
    # "boot time from <file>" / "offset +02:00 (--host-offset)"; None: its events could not be
    # placed on the timeline (`clock_note` says why)
    clock: str | None = None
    clock_note: str | None = None


@dataclass(kw_only=True, eq=False, repr=False)
class HostEvent(Record):
    """One event of a host record: an Xid, an ECC or PCIe error, an OOM kill, a pod killed."""

    source: str  # the file it was read from
    line: int
    text: str
    # xid | gpu-lost | ecc | row-remap | nvlink | pcie-aer | oom-kill | oom-killed | evicted |
    # crash-loop | probe-failed | killed | slurm-oom | slurm-timeout | slurm-node-fail
    kind: str
    time: str | None = None  # on the server log's clock, ISO 8601 without zone; None: unplaced
    seconds_before_failure: float | None = None  # negative: after the failure
    xid: int | None = None
    mnemonic: str | None = None
    bus_id: str | None = None  # 0000:3b:00.0
    gpu: int | None = None  # the GPU's index on its host (nvidia-smi's), when known
    hardware: bool = False  # a hardware or driver fault (not an application's own error)
    action: str | None = None  # what NVIDIA's catalogue (or the orchestrator's meaning) calls for
    investigate: str | None = None
    blamed: bool = False  # this event is the failure's cause (see Attribution)
    note: str | None = None  # why it is or is not blamed


@dataclass(kw_only=True, eq=False, repr=False)
class GpuInfo(Record):
    """A GPU of the host as nvidia-smi lists it."""

    index: int
    bus_id: str | None = None
    name: str | None = None
    uuid: str | None = None


@dataclass(kw_only=True, eq=False, repr=False)
class Attribution(Record):
    """Which rank ran on which GPU, and the host event that caused the failure, if one did."""

    ranks: dict[str, int] = field(default_factory=dict)  # rank (as the log names it) -> GPU index
    how: list[str] = field(default_factory=list)  # how the mapping was read
    failing_ranks: list[str] = field(default_factory=list)
    involved_gpus: list[int] = field(default_factory=list)
    cause: int | None = None  # index into HostRecords.events of the blamed event
    verdict: str | None = None  # one sentence: the host's part in the failure
    do_now: str | None = None  # the action that replaces the server-side advice when the host is to blame


@dataclass(kw_only=True, eq=False, repr=False)
class HostRecords(Record):
    """The other records of the incident: their events on the server log's timeline, the
    GPUs, and what they say about the failure."""

    sources: list[HostSource] = field(default_factory=list)
    events: list[HostEvent] = field(default_factory=list)
    gpus: list[GpuInfo] = field(default_factory=list)
    attribution: Attribution = field(default_factory=Attribution)
    window_seconds: float = 3600.0  # how long before the failure a host event can be its cause
    failure_time: str | None = None  # the failure's time the events are measured from
    failure_time_from: str | None = None  # where it was read ("the failure at line 98", "the log's last timestamp")


@dataclass(kw_only=True, eq=False, repr=False)
class ChartPoint(Record):
    """A stretch of the log on the chart: each load figure's minimum, maximum and last value there."""

    line: int
    end_line: int
    seconds: float | None = None  # of its last load line, from Chart.start
    # "running", "queued", "token_usage" (%), "throughput" (token/s), "cache_hit" (%), each
    # optionally with a rank ("running DP1") -> [min, max, last]
    values: dict[str, list[float]] = field(default_factory=dict)


@dataclass(kw_only=True, eq=False, repr=False)
class ChartMark(Record):
    """Something placed on the chart's time axis: a phase (a band up to `end_*`), a failure, a
    restart, a host event."""

    kind: str  # phase | failure | request-error | restart | host
    label: str
    line: int | None = None
    seconds: float | None = None
    end_line: int | None = None
    end_seconds: float | None = None
    strong: bool = False  # the crash itself, or a hardware fault / the blamed host event


@dataclass(kw_only=True, eq=False, repr=False)
class Chart(Record):
    """The timeline the HTML report draws: the load series, downsampled to a few hundred points
    (every spike kept as a point's maximum), the same around the crash at a finer grain, and
    the marks. Only `--format html` builds it; it is no part of the JSON."""

    start: str | None = None  # the log's first timestamp: `seconds` count from it
    points: list[ChartPoint] = field(default_factory=list)
    zoom: list[ChartPoint] = field(default_factory=list)
    marks: list[ChartMark] = field(default_factory=list)
    load_lines: int = 0  # the load lines the points summarise
    first_line: int = 1
    last_line: int = 0
    last_seconds: float | None = None


@dataclass(kw_only=True, eq=False, repr=False)
class Report(Record):
    """Everything one log says: its environment, timeline, failures and the findings that explain them."""

    COMPUTED = ("exit_code",)

    source: str
    sources: list[str] = field(default_factory=list)
    lines: int = 0
    bytes: int = 0
    environment: Environment = field(default_factory=Environment)
    timeline: Timeline = field(default_factory=Timeline)
    failures: list[Failure] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    patched_command: str | None = None
    baseline: BaselineComparison | None = None
    host: HostRecords | None = None  # the incident's other records (`analyze --with`)
    # about this run rather than the log (the scanner fell back to its portable engine): the
    # CLI prints them on stderr; not part of the JSON, which describes the log
    diagnostics: Annotated[list[str], EXCLUDED] = hidden(list)
    # the HTML report's timeline (pipeline/chart.py); None unless asked for; not in the JSON
    chart: Annotated[Chart | None, EXCLUDED] = hidden(lambda: None)

    @computed_field(description="1: a failure ended or broke the server; 0: none found.")  # type: ignore[prop-decorator]
    @property
    def exit_code(self) -> int:
        if any(f.fatal for f in self.failures):
            return 1
        if self.host is not None and self.host.attribution.cause is not None:
            return 1  # the host records show it was killed (OOMKilled while loading: no error in the log)
        return 1 if any(f.severity in ("crash", "hang") and f.failure is None and f.unlikely is None
                        for f in self.findings) else 0

    @property
    def fatal_failures(self) -> list[Failure]:
        return [f for f in self.failures if f.fatal]

    @property
    def request_failures(self) -> list[Failure]:
        return [f for f in self.failures if not f.fatal]
