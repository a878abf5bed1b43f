"""`triage` command line: parses options and calls library functions, nothing more.

What each command does lives in the library (triage.commands.*, triage.commands.watch, triage.commands.run, ...);
here: option names, help texts, defaults from configuration (triage.commands.settings), and
turning errors into one line on stderr.

Exit codes: 0 no failure found, 1 a failure was found (or `catalogue check` found a
problem), 2 usage or input error, 3 `watch` timed out. `--exit-zero` turns 1 (and 3) into 0.
"""

# No `from __future__ import annotations` here: typer would have to evaluate every option's
# annotation from its string (a compile and an eval each), 8 ms of a 10 KB log's run.
import contextlib
import errno
import functools
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperArgument, TyperCommand

from triage.core.errors import EXIT_USAGE, TriageError

CONTEXT = {"help_option_names": ["-h", "--help"]}


class _Command(TyperCommand):
    """Arguments shown by their metavar alone: typer would add a Python type (`<list[str]>`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401
        super().__init__(*args, **kwargs)
        for p in self.params:
            if isinstance(p, TyperArgument):
                p.display_type_rich = lambda ctx: None  # type: ignore[method-assign]

    def collect_usage_pieces(self, ctx: Any) -> list[str]:  # noqa: ANN401 - a click Context
        """The usage line in click's and POSIX's spelling, `LOG...` and `[DIR]`, whatever the
        typer version (0.2x writes a required argument as `{LOG}`, which reads as a choice)."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if isinstance(p, TyperArgument):
                name = p.metavar or (p.name or "").upper()
                name = name if p.required else f"[{name}]"
                pieces.append(name + ("..." if p.nargs != 1 else ""))
        return pieces


def _new_app() -> typer.Typer:
    return typer.Typer(add_completion=True, no_args_is_help=True, rich_markup_mode=None, context_settings=CONTEXT,
                       help="Crash triage and workaround recommendations for LLM inference server logs.")


app = _new_app()
catalogue_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, context_settings=CONTEXT,
                            help="Validate and inspect the signature catalogue.")
app.add_typer(catalogue_app, name="catalogue")


class Format(str, Enum):
    markdown = "markdown"
    md = "md"
    json = "json"


class AnalyzeFormat(str, Enum):
    markdown = "markdown"
    md = "md"
    json = "json"
    issue = "issue"
    html = "html"


class SchemaName(str, Enum):
    report = "report"
    catalogue = "catalogue"
    signature = "signature"
    workaround = "workaround"


# options shared by several commands; metavars are spelled out so that --help shows no Python types
FormatOpt = Annotated[Optional[Format], typer.Option(  # noqa: UP045 - typer needs Optional
    "--format", "-f", metavar="markdown|md|json", show_default=False,
    help="Report format: markdown (default; rendered when stdout is a terminal) or json.")]
AnalyzeFormatOpt = Annotated[Optional[AnalyzeFormat], typer.Option(  # noqa: UP045
    "--format", "-f", metavar="markdown|md|json|issue|html", show_default=False,
    help="Report format: markdown (default; rendered when stdout is a terminal), json, issue (the body "
    "of an upstream bug report in the engine's template), or html (one self-contained page with an SVG "
    "timeline of the load, phases, failures and host events; a single LOG).")]
EventFormatOpt = Annotated[Optional[Format], typer.Option(  # noqa: UP045
    "--format", "-f", metavar="markdown|md|json", show_default=False,
    help="markdown (default) or json (one event a line).")]
OutputOpt = Annotated[Optional[Path], typer.Option(  # noqa: UP045
    "--output", "-o", metavar="FILE", help="Write the report to FILE instead of stdout.")]
CatalogueOpt = Annotated[Optional[list[Path]], typer.Option(  # noqa: UP045
    "--catalogue", "-c", metavar="DIR",
    help="Extra catalogue directory (signatures/ and workarounds/ inside, or entries directly). Repeatable.")]
RedactOpt = Annotated[Optional[bool], typer.Option(  # noqa: UP045
    "--redact/--no-redact", show_default=False,
    help="Mask tokens, keys and passwords in the report (default: on).")]
RedactIpsOpt = Annotated[Optional[bool], typer.Option(  # noqa: UP045
    "--redact-ips/--no-redact-ips", show_default=False, help="Also mask IP addresses (default: off).")]
ExitZeroOpt = Annotated[Optional[bool], typer.Option(  # noqa: UP045
    "--exit-zero/--no-exit-zero", show_default=False,
    help="Exit 0 even when a failure is found (usage and input errors still exit 2).")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the report and errors: no status or progress lines.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Also say which configuration and catalogue were used, and timings.")]
TimeoutOpt = Annotated[Optional[float], typer.Option(  # noqa: UP045
    "--timeout", "-t", metavar="SECONDS", help="Give up after this many seconds: exit 3 with the phase it was stuck in.")]
GraceOpt = Annotated[float, typer.Option(
    "--grace", metavar="SECONDS", help="Seconds without a new line after which a failure's lines are taken as complete.")]
JobsOpt = Annotated[Optional[int], typer.Option(  # noqa: UP045
    "--jobs", "-j", metavar="N", show_default=False, help="Processes to use (default 0: one per core).")]


def _version(value: bool) -> None:
    if value:
        from triage import __version__

        sys.stdout.write(f"triage {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def main_options(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_version,
                                          help="Print triage's version and exit.")] = False,
    config: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--config", metavar="FILE", help="Read settings from this TOML file instead of searching for triage.toml / pyproject.toml.")] = None,
    isolated: Annotated[bool, typer.Option("--isolated", help="Ignore configuration files (TRIAGE_* variables still apply).")] = False,
) -> None:
    """Crash triage and workaround recommendations for LLM inference server logs."""
    ctx.obj = {"config": config, "isolated": isolated}  # read by the command, so that -h works whatever the file says


def _settings(ctx: typer.Context) -> Any:  # noqa: ANN401 - triage.commands.settings.Settings
    from triage.commands.settings import load_settings

    root = ctx.find_root().obj
    given = root if isinstance(root, dict) else {}
    return load_settings(config=given.get("config"), isolated=bool(given.get("isolated")))


def _start(ctx: typer.Context, quiet: bool, verbose: bool) -> Any:  # noqa: ANN401
    """Verbosity set, settings found: what every command does first."""
    from triage.core.verbosity import LOG, configure

    if quiet and verbose:
        raise TriageError("--quiet and --verbose contradict each other; give one")
    configure(quiet=quiet, verbose=verbose)
    s = _settings(ctx)
    LOG.debug("configuration: %s", s.file or "none found")
    from triage.catalogue.load import checkout_instead

    checkout = checkout_instead()
    if checkout is not None:  # an installed triage run inside a clone: edits there count (see builtin_dirs)
        from triage.commands.output import note

        note(f"using the catalogue of the checkout at {checkout}, not the installed copy's")
    return s


def _format(s: Any, cli: Format | AnalyzeFormat | None, allowed: tuple[str, ...] | None = None) -> str:  # noqa: ANN401
    from triage.commands.output import FORMATS, normalise_format

    return normalise_format(cli.value if cli is not None else s.get("format", None, "markdown"), allowed or FORMATS)


def _load(dirs: list[str]):  # noqa: ANN202
    from triage.catalogue.load import load_catalogue
    from triage.core.verbosity import LOG

    cat = load_catalogue(dirs, cache=True)  # the on-disk cache is the CLI's choice, not the library's
    LOG.debug("catalogue: %d signatures, %d workarounds (extra directories: %s)",
              len(cat.signatures), len(cat.workarounds), ", ".join(dirs) or "none")
    return cat


def _exit(code: int, exit_zero: bool, zeroed: tuple[int, ...] = (1,)) -> None:
    raise typer.Exit(0 if exit_zero and code in zeroed else code)


@app.command(cls=_Command)
def analyze(
    ctx: typer.Context,
    logs: Annotated[list[str], typer.Argument(metavar="LOG", show_default=False,
                                              help="Log files, directories or globs; '-' reads stdin. .gz is read transparently. A directory where no file looks like a server log (binaries, text with no log line) is an input error: exit 2.")],
    format: AnalyzeFormatOpt = None,
    output: OutputOpt = None,
    catalogue: CatalogueOpt = None,
    engine_version: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--engine-version", metavar="VERSION", help="The engine's version, when the log does not print it (e.g. 0.5.3).")] = None,
    engine_version_alias: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--version", metavar="VERSION", hidden=True, help="Old spelling of --engine-version.")] = None,
    command: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--command", metavar="COMMAND", help="The server's launch command, to patch with the workaround.")] = None,
    no_hyperscan: Annotated[bool, typer.Option("--no-hyperscan", help="Use the portable scanner (for comparison).")] = False,
    jobs: JobsOpt = None,
    redact: RedactOpt = None,
    redact_ips: RedactIpsOpt = None,
    baseline: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--baseline", metavar="LOG", help="A healthy (or earlier) log of the same server: compare startup times and list its new warning and error lines.")] = None,
    with_records: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
        "--with", metavar="FILE", help="Another record of the same incident: a kernel log (dmesg -T, journalctl -k), "
        "nvidia-smi (-q, CSV or table), kubectl describe pod / get events / pod JSON, Slurm output or sacct. "
        "Repeat for several; docs/host-records.md.")] = None,
    host_offset: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--host-offset", metavar="+HH:MM", help="How far the host records' local clock is ahead of the server "
        "log's (e.g. +02:00); times with a zone need none.")] = None,
    exit_zero: ExitZeroOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Analyse server logs: what failed, why, what to do now, and the evidence."""
    from triage.commands.analyze import analyze_logs, render
    from triage.commands.output import use, write_output
    from triage.pipeline.analyze import Options

    s = _start(ctx, quiet, verbose)
    fmt = _format(s, format, ("markdown", "json", "issue", "html"))
    if engine_version and engine_version_alias and engine_version != engine_version_alias:
        raise TriageError("--engine-version and --version (its old spelling) disagree; give one")
    njobs = s.get("jobs", jobs, 0)
    opts = Options(version=engine_version or engine_version_alias, command=command,
                   prefer_hyperscan=not no_hyperscan, workers=njobs, progress=True, chart=fmt == "html")
    out = use(redact=s.get("redact", redact, True), ips=s.get("redact-ips", redact_ips, False))
    result = analyze_logs(logs, _load(s.catalogues(catalogue)), opts, baseline=baseline, jobs=njobs,
                          redact=out.redact, redact_ips=out.ips, with_records=with_records, host_offset=host_offset)
    from triage.core.verbosity import LOG

    for note in result.diagnostics:  # how the scan ran (the portable scanner, ...): stderr, not the report
        LOG.info(note)
    write_output(render(result, fmt), output, result.paths, markdown=fmt == "markdown")
    for err in result.errors.values():
        out.error(err)
    _exit(result.exit_code, s.get("exit-zero", exit_zero, False))


@app.command(cls=_Command)
def fleet(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="A log archive: a directory tree, a glob, or an object-storage URL (s3://, gs://: needs fsspec and its filesystem package). .gz is read transparently. An archive where no file looks like a server log (binaries, text with no log line) is an input error: exit 2.")],
    ray: Annotated[Optional[str], typer.Option("--ray", metavar="ADDRESS|auto|local", help="Run on Ray: local starts Ray here, auto joins this machine's cluster, or a cluster address. Without it: the local process pool.")] = None,  # noqa: UP045
    since: Annotated[Optional[str], typer.Option("--since", metavar="DATE", help="Only failures at or after DATE (2026-11-24, 2026-11-24T08:00, or an age: 7d, 12h).")] = None,  # noqa: UP045
    format: FormatOpt = None,
    output: OutputOpt = None,
    jobs: JobsOpt = None,
    batch: Annotated[int, typer.Option("--batch", metavar="N", help="Logs per task.")] = 32,
    catalogue: CatalogueOpt = None,
    redact: RedactOpt = None,
    redact_ips: RedactIpsOpt = None,
    exit_zero: ExitZeroOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """A leaderboard of the failures across a whole log archive: which hit the most servers, where, since when, and what to do."""
    from triage.commands.fleet.render import IDS, leaderboard, render
    from triage.commands.fleet.run import FleetOptions, run_fleet
    from triage.commands.fleet.source import holds
    from triage.commands.fleet.when import parse_since
    from triage.commands.output import use, write_output

    s = _start(ctx, quiet, verbose)
    fmt = _format(s, format)
    out = use(redact=s.get("redact", redact, True), ips=s.get("redact-ips", redact_ips, False))
    njobs = s.get("jobs", jobs, 0)
    if njobs < 0 or batch < 1:
        raise TriageError("--jobs takes 0 or more, --batch 1 or more")
    if output is not None and holds(source, output):
        raise TriageError(f"--output {output} is inside the archive {source}; refusing to overwrite a log")
    when = parse_since(since) if since is not None else None
    opts = FleetOptions(ray=ray, since=when, jobs=njobs, batch=batch, catalogue_dirs=s.catalogues(catalogue), cache=True)
    tally = run_fleet(source, opts)
    if tally.read and sum(tally.not_logs.values()) == tally.read and not tally.failed and not tally.skipped_old:
        from triage.commands.analyze import no_log_error

        raise no_log_error(source, tally.not_logs, tally.not_log_names)
    doc = out.data(leaderboard(tally, source, when), keep=IDS)
    write_output(render(doc, fmt), output, markdown=fmt == "markdown")
    if tally.failed:
        out.error(f"{tally.failed} log(s) could not be analysed (listed in the report)")
    _exit(1 if tally.groups else 2 if tally.failed else 0, s.get("exit-zero", exit_zero, False))


@app.command(cls=_Command)
def signatures(
    ctx: typer.Context,
    engine: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--engine", "-e", metavar="ENGINE", help="Only this engine (sglang, vllm, trtllm, tgi, triton, any).")] = None,
    format: FormatOpt = None,
    output: OutputOpt = None,
    catalogue: CatalogueOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """List the catalogue's signatures."""
    from triage.commands.catalogue.show import list_json, list_markdown
    from triage.commands.output import write_output

    s = _start(ctx, quiet, verbose)
    fmt = _format(s, format)
    cat = _load(s.catalogues(catalogue))
    text = list_json(cat, engine) if fmt == "json" else list_markdown(cat, engine)
    write_output(text, output, markdown=fmt == "markdown")


@app.command(cls=_Command)
def show(
    ctx: typer.Context,
    signature_id: Annotated[str, typer.Argument(metavar="ID", help="Signature (or workaround) id.")],
    output: OutputOpt = None,
    catalogue: CatalogueOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Print one signature with its workarounds, as a person wants to read it."""
    from triage.commands.catalogue.show import show_markdown
    from triage.commands.output import write_output

    s = _start(ctx, quiet, verbose)
    write_output(show_markdown(_load(s.catalogues(catalogue)), signature_id), output, markdown=True)


@app.command(cls=_Command)
def schema(
    name: Annotated[SchemaName, typer.Argument(metavar="report|catalogue|signature|workaround",
                                               help="report: what analyze --format json prints; catalogue: one signature or workaround YAML file.")],
    output: OutputOpt = None,
) -> None:
    """Print a JSON Schema (generated from the models; the same as docs/schemas/NAME.json)."""
    from triage.commands.output import write_output
    from triage.commands.schema import schema_text

    write_output(schema_text(name.value), output)


@catalogue_app.command("check", cls=_Command)
def catalogue_check(
    ctx: typer.Context,
    directory: Annotated[Optional[Path], typer.Argument(  # noqa: UP045
        metavar="DIR", show_default=False, help="Check only this catalogue directory (default: the built-in one).")] = None,
    catalogue: CatalogueOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only problems and the summary.")] = False,
    verbose: VerboseOpt = False,
) -> None:
    """Validate every entry and run every example; exit 1 on any problem."""
    from triage.commands.catalogue.check import check
    from triage.commands.output import current

    s = _start(ctx, quiet, verbose)
    dirs = [str(directory)] if directory is not None else None
    problems, summary = check(dirs, s.catalogues(catalogue), verbose=not quiet)
    current().write(summary)  # file names and messages from a catalogue: the terminal filter too
    raise typer.Exit(1 if problems else 0)


@catalogue_app.command("backtest", cls=_Command)
def catalogue_backtest(
    ctx: typer.Context,
    corpus: Annotated[Path, typer.Argument(metavar="CORPUS", help="A corpus directory: cases/<id>.log with cases/<id>.yaml labels.")],
    catalogue: CatalogueOpt = None,
    against: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--against", metavar="REV|DIR", help="A git revision of the catalogue, or another catalogue directory: show per case what changed.")] = None,
    split: Annotated[str, typer.Option("--split", metavar="dev|test|all", help="Which cases to run.")] = "all",
    show_test: Annotated[bool, typer.Option(
        "--show-test", help="Also name test-split cases in the lists of misses and changes (they always count in the figures).")] = False,
    format: FormatOpt = None,
    output: OutputOpt = None,
    jobs: JobsOpt = None,
    min_detected: Annotated[Optional[float], typer.Option("--min-detected", metavar="PCT", help="Exit 1 below this percentage.")] = None,  # noqa: UP045
    min_exception: Annotated[Optional[float], typer.Option("--min-exception", metavar="PCT")] = None,  # noqa: UP045
    min_recognised: Annotated[Optional[float], typer.Option("--min-recognised", metavar="PCT")] = None,  # noqa: UP045
    min_right1: Annotated[Optional[float], typer.Option("--min-right1", metavar="PCT")] = None,  # noqa: UP045
    min_fix1: Annotated[Optional[float], typer.Option("--min-fix1", metavar="PCT")] = None,  # noqa: UP045
    min_fixany: Annotated[Optional[float], typer.Option("--min-fixany", metavar="PCT")] = None,  # noqa: UP045
    min_clean: Annotated[Optional[float], typer.Option("--min-clean", metavar="PCT")] = None,  # noqa: UP045
    exit_zero: ExitZeroOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run the pipeline on every case of a labelled corpus and score it; exit 1 below a --min-* threshold."""
    from triage.commands.catalogue.backtest import backtest_report
    from triage.commands.output import write_output

    s = _start(ctx, quiet, verbose)
    fmt = _format(s, format)
    minimums = {k: v for k, v in (("detected", min_detected), ("exception", min_exception),
                                  ("recognised", min_recognised), ("right1", min_right1), ("fix1", min_fix1),
                                  ("fixany", min_fixany), ("clean", min_clean)) if v is not None}
    text, code = backtest_report(str(corpus), split, s.catalogues(catalogue), against, s.get("jobs", jobs, 0), minimums, fmt,
                                 show_test=show_test)
    write_output(text, output, markdown=fmt == "markdown")
    _exit(code, s.get("exit-zero", exit_zero, False))


def _watch_options(s: Any, timeout: float | None, until: str, fmt: str, grace: float,  # noqa: ANN401
                   catalogue: list[Path] | None, redact: bool | None, redact_ips: bool | None, output: Path | None) -> Any:  # noqa: ANN401
    from triage.commands.output import use
    from triage.commands.watch import WatchOptions

    # status lines, events and reports of watch, run and retry all pass this Output
    out = use(redact=s.get("redact", redact, True), ips=s.get("redact-ips", redact_ips, False))
    return WatchOptions(timeout=timeout, until=until, fmt="json" if fmt == "json" else "md", grace=grace,
                        catalogue_dirs=s.catalogues(catalogue), redact=out.redact,
                        redact_ips=out.ips, output=str(output) if output else None)


@app.command(cls=_Command)
def watch(
    ctx: typer.Context,
    log: Annotated[str, typer.Argument(metavar="LOG", help="The server's log file; it may not exist yet, and may be truncated or rotated.")],
    timeout: TimeoutOpt = None,
    until: Annotated[str, typer.Option("--until", metavar="ready|exit", help="ready: stop when the server is ready (exit 0); exit: keep watching it serve until a failure or the timeout.")] = "ready",
    format: EventFormatOpt = None,
    output: OutputOpt = None,
    grace: GraceOpt = 2.0,
    catalogue: CatalogueOpt = None,
    redact: RedactOpt = None,
    redact_ips: RedactIpsOpt = None,
    exit_zero: ExitZeroOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Follow a server log as it is written: phase on stderr; ready (0), failure report (1), timeout (3)."""
    from triage.commands.watch import watch_file

    s = _start(ctx, quiet, verbose)
    opts = _watch_options(s, timeout, until, _format(s, format), grace, catalogue, redact, redact_ips, output)
    _exit(watch_file(log, opts), s.get("exit-zero", exit_zero, False), zeroed=(1, 3))


@app.command(cls=_Command, context_settings={"allow_interspersed_args": False})
def run(
    ctx: typer.Context,
    command: Annotated[Optional[list[str]], typer.Argument(  # noqa: UP045 - optional only for --dry-run
        metavar="COMMAND", show_default=False, help="The server's launch command, after --.")] = None,
    log: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--log", "-l", metavar="FILE", help="Log file to write (default: triage-run-<timestamp>.log here).")] = None,
    timeout: TimeoutOpt = None,
    format: EventFormatOpt = None,
    output: OutputOpt = None,
    grace: GraceOpt = 2.0,
    catalogue: CatalogueOpt = None,
    redact: RedactOpt = None,
    redact_ips: RedactIpsOpt = None,
    retry: Annotated[Optional[int], typer.Option("--retry", metavar="N", help="When the server dies of a known failure with a workaround that can be applied automatically, relaunch it with that workaround, at most N times; then summarise (docs/watch.md).")] = None,  # noqa: UP045
    until: Annotated[Optional[str], typer.Option("--until", metavar="ready|exit", help="With --retry. ready (default): an attempt holds once ready, and is left running; exit: it holds by serving until it exits cleanly or you stop it.")] = None,  # noqa: UP045
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --retry: print the changes that would be made for the failure in the existing --log FILE, in order; start nothing.")] = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Start a server, tee its output to the terminal and a log, and watch it; exit with its status."""
    s = _start(ctx, quiet, verbose)
    if retry is None and (until is not None or dry_run):
        raise TriageError("--until and --dry-run go with --retry N")
    opts = _watch_options(s, timeout, until or ("ready" if retry is not None else "exit"), _format(s, format),
                          grace, catalogue, redact, redact_ips, output)
    if retry is None:
        from triage.commands.run import run_command

        raise typer.Exit(run_command(command or [], log, opts))
    from triage.commands.retry.loop import plan_from_log, retry_command

    if dry_run:
        if log is None:
            raise TriageError("--dry-run reads the log of a failed server: give it with --log FILE")
        raise typer.Exit(plan_from_log(log, command or [], opts, retry))
    raise typer.Exit(retry_command(command or [], log, opts, retry))


@app.command(cls=_Command)
def new(
    ctx: typer.Context,
    log: Annotated[str, typer.Argument(metavar="LOG", help="The log with the unknown failure; '-' reads stdin.")],
    failure: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--failure", "-n", metavar="N", help="Failure number in the report (1-based; default: the first one no specific signature explains).")] = None,
    output: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--output", "-o", metavar="FILE", help="Write the skeleton to this new file.")] = None,
    catalogue: CatalogueOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Write a catalogue signature skeleton for an unknown failure (fill in its TODOs)."""
    from triage.commands.new import skeleton_for
    from triage.commands.output import write_output

    s = _start(ctx, quiet, verbose)
    if output is not None:
        if log != "-" and Path(log).exists() and Path(log).resolve() == output.resolve():
            raise TriageError(f"--output {output} is the input log; refusing to overwrite it")
        if output.exists():
            raise TriageError(f"--output {output} exists; refusing to overwrite it")
    write_output(skeleton_for(log, _load(s.catalogues(catalogue)), failure), output, [log])


Classes = tuple[type[BaseException], ...]


def _click_exceptions() -> tuple[Classes, Classes, Classes]:
    """(Exit, Abort, usage error) classes: typer raises its own or click's, by version
    (newer typer vendors click as typer._click and no longer installs click)."""
    exits: list[type[BaseException]] = [typer.Exit]
    aborts: list[type[BaseException]] = [typer.Abort]
    usage: list[type[BaseException]] = [typer.TyperException]
    # whichever typer uses was imported with it: importing click when typer vendors its own
    # cost a tenth of a 10 KB log's run
    for mod in ("typer._click.exceptions", "click.exceptions"):
        m = sys.modules.get(mod)
        if m is None:
            continue
        for found, name in ((exits, "Exit"), (aborts, "Abort"), (usage, "ClickException")):
            cls = getattr(m, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found.append(cls)
    return tuple(exits), tuple(aborts), tuple(usage)


# typer 0.29 validates option values with pydantic and passes its sentences through
_PLAIN_USAGE = (
    ("Input should be a valid integer, unable to parse string as an integer", "expected a whole number"),
    ("Input should be a valid number, unable to parse string as a number", "expected a number"),
    ("Input should be a valid boolean, unable to interpret input", "expected true or false"),
)


@functools.cache
def _command(only: str | None = None) -> Any:  # noqa: ANN401 - typer's click Command (vendored or click's, by version)
    """The click command behind `app`, built once per process: typer builds it anew on every
    call, with a pydantic TypeAdapter per option (about 20 ms a call), and a command is reusable.

    `only`: the command the arguments name first, built alone, under the same top-level
    options: typer builds every command's parameters up front, and the other eight were a
    fiftieth of a small log's run. Help, completion and any other first argument get the whole app."""
    if only is None:
        return typer.main.get_command(app)
    one = _new_app()
    one.registered_callback = app.registered_callback
    one.registered_commands = [c for c in app.registered_commands if _name(c) == only]
    return typer.main.get_command(one)


def _name(info: Any) -> str:  # noqa: ANN401 - typer's CommandInfo
    return info.name or info.callback.__name__.replace("_", "-")


def _only(args: list[str]) -> str | None:
    """The command to build alone for `args`, if any (see _command)."""
    if not args or os.environ.get("_TRIAGE_COMPLETE"):  # typer's completion: every command
        return None
    first = _command_at(args)
    return args[first] if first < len(args) and args[first] in {_name(c) for c in app.registered_commands} else None


# Global options go on either side of the command, as ruff's do: click takes the program's own
# (--config, --isolated) only before the command, and a command's switches (-q, -v, --no-redact,
# --redact-ips, --exit-zero, ...) only after it; the arguments are put in that order before
# click reads them.
_ROOT_OPTIONS = {"--config": True, "--isolated": False}  # name: takes a value


def _command_at(args: list[str]) -> int:
    """Where the command's name is: after the options before it (and --config's value)."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        i += 2 if _ROOT_OPTIONS.get(args[i]) else 1
    return i


def _options_of(path: list[str]) -> tuple[set[str], set[str]] | None:
    """(options that take a value, switches) of the command `path` names; None: no such command."""
    alone = path[0] in {_name(c) for c in app.registered_commands}  # `catalogue` is a group: the whole app
    cmd: Any = _command(path[0] if alone else None)
    for name in path:
        cmd = getattr(cmd, "commands", {}).get(name)
        if cmd is None:
            return None
    values: set[str] = set()
    switches: set[str] = set()
    for p in cmd.params:
        if getattr(p, "param_type_name", "") == "option":
            flag = getattr(p, "is_flag", False) or getattr(p, "count", False)
            (switches if flag else values).update((*p.opts, *p.secondary_opts))
    return values, switches


def _global_options_anywhere(args: list[str]) -> list[str]:
    """`triage -q analyze X` and `triage analyze X --config F` as click wants them:
    `triage --config F analyze -q X`. Nothing after `--` (a server's own command) is touched,
    nor, for `run`, anything from the server command on."""
    first = _command_at(args)
    if first >= len(args) or os.environ.get("_TRIAGE_COMPLETE"):
        return args  # no command: click's help or usage error, as typed
    path, i = [args[first]], first + 1
    if path[0] == "catalogue" and i < len(args) and not args[i].startswith("-"):
        path.append(args[i])
        i += 1
    found = _options_of(path)
    if found is None:
        return args
    values, switches = found
    head: list[str] = []
    early: list[str] = []
    j = 0
    while j < first:
        a = args[j]
        if _ROOT_OPTIONS.get(a):
            head += args[j:j + 2]
            j += 2
            continue
        if a in switches:
            early.append(a)
        elif a not in ("-q", "--quiet", "-v", "--verbose"):  # (`schema` has nothing to be quiet about)
            head.append(a)  # -V, -h and the like stay the program's
        j += 1
    tail: list[str] = []
    rest = args[i:]
    j = 0
    while j < len(rest):
        a = rest[j]
        name = a.split("=", 1)[0] if a.startswith("--") else a
        if a == "--" or (path[0] == "run" and not a.startswith("-")):
            tail += rest[j:]
            break
        if name in _ROOT_OPTIONS and name not in values | switches:
            takes = _ROOT_OPTIONS[name] and "=" not in a
            head += rest[j:j + 2] if takes else [a]
            j += 2 if takes else 1
            continue
        tail.append(a)
        if a in values and j + 1 < len(rest):  # an option's value is never an option of ours
            tail.append(rest[j + 1])
            j += 1
        j += 1
    return head + path + early + tail


def run_main(argv: list[str] | None = None, prog_name: str | None = None) -> int:
    """Run the CLI on `argv` (default: sys.argv[1:]) and return the exit code: one clear line
    on stderr for any error, never a traceback."""
    from triage.core import diskcache, recache
    from triage.core.pydantic_plugins import skip_discovery

    skip_discovery()  # no pydantic plugin is meant for triage's own models (see that module)
    recache.use_disk(diskcache.cache_dir())  # the command line keeps compiled patterns (see that module)
    from triage.commands.output import current, use

    use()  # each run starts from the default (redacting) Output; a command sets its own options
    _lenient_encoding()

    exits, aborts, usage = _click_exceptions()
    try:
        args = _global_options_anywhere(list(sys.argv[1:] if argv is None else argv))
        rv = _command(_only(args))(args=args, prog_name=prog_name or "triage", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except exits as e:
        code = getattr(e, "exit_code", 1)
    except aborts:
        sys.stderr.write("triage: aborted\n")
        code = 130
    except usage as e:
        msg = e.format_message() if hasattr(e, "format_message") else str(e)
        msg = msg.replace(": Value error, ", ": ")  # newer typer passes pydantic's wording through
        for pydantic_says, plain in _PLAIN_USAGE:
            msg = msg.replace(pydantic_says, plain)
        if type(e).__name__ == "NoArgsIsHelpError":  # bare `triage`: the help, not an error line
            sys.stderr.write(msg.rstrip() + "\n")
        else:
            current().error(f"{msg} (see triage --help)")
        code = EXIT_USAGE
    except TriageError as e:
        current().error(str(e))
        code = e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("triage: interrupted\n")
        code = 130
    except SystemExit as e:  # typer's completion options exit from inside; return their code too
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else EXIT_USAGE
        if isinstance(e.code, str):
            current().error(e.code)
    except BrokenPipeError:
        code = 0
    except OSError as e:
        if os.environ.get("TRIAGE_DEBUG"):
            raise
        if e.errno in _FULL:  # stdout redirected onto a full disk: the disk, not triage
            current().error(f"cannot write{' ' + str(e.filename) if e.filename else ''}: {e.strerror}")
            _drop_stdout()
        else:
            current().error(f"{type(e).__name__}: {e} (set TRIAGE_DEBUG=1 for details)", prefix="triage: internal error: ")
        code = EXIT_USAGE
    except Exception as e:  # noqa: BLE001 - the promise is: never a traceback at 3 a.m.
        if os.environ.get("TRIAGE_DEBUG"):
            raise
        current().error(f"{type(e).__name__}: {e} (set TRIAGE_DEBUG=1 for details)", prefix="triage: internal error: ")
        code = EXIT_USAGE
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    except OSError as e:  # the report's last bytes, onto a full disk
        if e.errno not in _FULL:
            raise
        current().error(f"cannot write: {e.strerror}")
        _drop_stdout()
        code = EXIT_USAGE
    recache.save()
    recache.use_disk(None)  # what a library caller does after this in the same process is not the CLI's
    return code


def _lenient_encoding() -> None:
    """Under LC_ALL=C or PYTHONIOENCODING=ascii stdout cannot encode what a log holds (a `✓`,
    a CJK message): such a character is written as an escape (`\u2713`) rather than ending the
    run in a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        if encoding not in ("utf-8", "utf8", "utf-16", "utf-32", "") and hasattr(stream, "reconfigure"):
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors="backslashreplace")


_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # a write that cannot succeed: the disk is full


def _drop_stdout() -> None:
    """After a failed write to stdout, what is left in its buffer must not be written again when
    the interpreter exits (a second error, and exit status 120): the real stdout now points at
    /dev/null. An in-process caller's stand-in stream is left alone."""
    out = sys.stdout
    if out is not sys.__stdout__ or out is None:
        return
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)


def main() -> None:
    """Entry point of the `triage` script."""
    sys.exit(run_main())
