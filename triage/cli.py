"""`triage` command line: thin; parses options, calls the pipeline, picks the renderer.

Exit codes: 0 no failure found, 1 a failure was found (or `catalogue check` found a
problem), 2 usage or input error, 3 `watch` timed out. Errors are one line on stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from triage.core.errors import EXIT_USAGE, TriageError

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Crash triage and workaround recommendations for LLM inference server logs.")
catalogue_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                            help="Validate and inspect the signature catalogue.")
app.add_typer(catalogue_app, name="catalogue")


class Format(str, Enum):
    md = "md"
    json = "json"


# options shared by analyze, watch and run
TimeoutOpt = Annotated[Optional[float], typer.Option(  # noqa: UP045
    "--timeout", "-t", help="Give up after this many seconds: exit 3 with the phase it was stuck in.")]
GraceOpt = Annotated[float, typer.Option(
    "--grace", help="Seconds without a new line after which a failure's lines are taken as complete.")]
EventFormatOpt = Annotated[Format, typer.Option("--format", "-f", help="md (default) or json (one event a line).")]
NoRedactOpt = Annotated[bool, typer.Option("--no-redact", help="Keep tokens, keys and passwords in the report.")]
RedactIpsOpt = Annotated[bool, typer.Option("--redact-ips", help="Also mask IP addresses.")]

CatalogueOpt = Annotated[Optional[list[Path]], typer.Option(  # noqa: UP045 - typer needs Optional
    "--catalogue", "-c", help="Extra catalogue directory (signatures/ and workarounds/ inside, or entries directly). Repeatable.")]


def _load(extra: list[Path] | None):  # noqa: ANN202
    from triage.catalogue.load import load_catalogue

    return load_catalogue([str(p) for p in extra or []], cache=True)


def _write(text: str, output: Path | None, inputs: list[str]) -> None:
    from triage.commands.output import current
    from triage.core.terminal import printable

    if output is None:
        current().write(text)
        return
    from triage.core.output import write_output

    write_output(printable(text), output, inputs)


@app.command()
def analyze(
    logs: Annotated[list[str], typer.Argument(help="Log files, directories or globs; '-' reads stdin. .gz is read transparently.")],
    format: Annotated[Format, typer.Option("--format", "-f", help="md (default) or json.")] = Format.md,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the report to this file.")] = None,  # noqa: UP045
    catalogue: CatalogueOpt = None,
    version: Annotated[Optional[str], typer.Option("--version", help="Engine version, when the log does not print it.")] = None,  # noqa: UP045
    command: Annotated[Optional[str], typer.Option("--command", help="The server's launch command, to patch.")] = None,  # noqa: UP045
    no_hyperscan: Annotated[bool, typer.Option("--no-hyperscan", help="Use the portable scanner (for comparison).")] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Processes to use (0: one per core).")] = 0,
    no_redact: NoRedactOpt = False,
    redact_ips: RedactIpsOpt = False,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="A healthy (or earlier) log of the same server: compare startup times and list its new warning and error lines.")] = None,  # noqa: UP045
) -> None:
    """Analyse server logs: what failed, why, what to do now, and the evidence."""
    from triage.commands.output import use
    from triage.pipeline.analyze import Options
    from triage.pipeline.analyze import analyze as run

    out = use(redact=not no_redact, ips=redact_ips)
    cat = _load(catalogue)
    opts = Options(version=version, command=command, prefer_hyperscan=not no_hyperscan, workers=jobs)
    paths = expand_inputs(logs)
    if baseline is not None and len(paths) > 1:
        raise TriageError("--baseline compares one log with one healthy log; give a single LOG")
    if len(paths) == 1:
        reports, errors = [run(paths[0], cat, opts)], dict[str, str]()
        if baseline is not None:
            from triage.commands.baseline import compare

            compare(reports[0], baseline, cat, opts)
    else:
        from triage.commands.many import analyze_many

        reports, errors = analyze_many(paths, cat, opts, jobs)
    for note in dict.fromkeys(d for r in reports for d in r.diagnostics):
        out.note(note)
    reports = [out.report(r) for r in reports]
    errors = {k: out.text(v) for k, v in errors.items()}
    # only the renderer asked for is imported (jinja2 is not needed for JSON)
    if format == Format.json:
        from triage.render.json_out import render_json
    else:
        from triage.render.markdown import render_markdown
    if len(paths) == 1:
        text = render_json(reports[0]) if format == Format.json else render_markdown(reports[0])
    else:
        from triage.commands.many import summarise, summary_dict, summary_markdown

        summary = summarise(reports, errors)
        if format == Format.json:
            text = render_json(reports, summary=summary_dict(summary))
        else:
            text = summary_markdown(summary) + "".join("\n---\n\n" + render_markdown(r) for r in reports)
    _write(text, output, paths)
    for err in errors.values():
        out.error(err)
    codes = [r.exit_code for r in reports] + [2 for _ in errors]
    raise typer.Exit(1 if 1 in codes else max(codes))


def expand_inputs(items: list[str]) -> list[str]:
    import glob

    out: list[str] = []
    for item in items:
        if item == "-":
            out.append(item)
            continue
        p = Path(item)
        if p.is_dir():
            files = sorted(str(f) for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
            if not files:
                raise TriageError(f"{item}: directory holds no files")
            out.extend(files)
        elif not p.exists() and any(c in item for c in "*?["):
            found = sorted(glob.glob(item, recursive=True))
            if not found:
                raise TriageError(f"{item}: no file matches")
            out.extend(found)
        elif not p.exists():
            raise TriageError(f"{item}: no such file")  # a name typed on the command line: a usage error
        else:
            out.append(item)
    return out


@app.command()
def fleet(
    source: Annotated[str, typer.Argument(help="A log archive: a directory tree, a glob, or an object-storage URL (s3://, gs://: needs fsspec and its filesystem package). .gz is read transparently.")],
    ray: Annotated[Optional[str], typer.Option("--ray", metavar="ADDRESS|auto|local", help="Run on Ray: local starts Ray here, auto joins this machine's cluster, or a cluster address. Without it: the local process pool.")] = None,  # noqa: UP045
    since: Annotated[Optional[str], typer.Option("--since", metavar="DATE", help="Only failures at or after DATE (2026-11-24, 2026-11-24T08:00, or an age: 7d, 12h).")] = None,  # noqa: UP045
    format: Annotated[Format, typer.Option("--format", "-f", help="md (default) or json (rows for dashboards).")] = Format.md,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the leaderboard to this file.")] = None,  # noqa: UP045
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Local pool processes (0: one per core); with --ray local, Ray's CPUs.")] = 0,
    batch: Annotated[int, typer.Option("--batch", help="Logs per task.")] = 32,
    catalogue: CatalogueOpt = None,
    no_redact: NoRedactOpt = False,
    redact_ips: RedactIpsOpt = False,
) -> None:
    """A leaderboard of the failures across a whole log archive: which hit the most servers, where, since when, and what to do."""
    from triage.commands.fleet.render import leaderboard, render_json, render_markdown
    from triage.commands.fleet.run import FleetOptions, run_fleet
    from triage.commands.fleet.when import parse_since
    from triage.commands.output import use

    out = use(redact=not no_redact, ips=redact_ips)
    if jobs < 0 or batch < 1:
        raise TriageError("--jobs takes 0 or more, --batch 1 or more")
    from triage.commands.fleet.source import holds

    if output is not None and holds(source, output):
        raise TriageError(f"--output {output} is inside the archive {source}; refusing to overwrite a log")
    when = parse_since(since) if since is not None else None
    opts = FleetOptions(ray=ray, since=when, jobs=jobs, batch=batch, catalogue_dirs=[str(p) for p in catalogue or []])
    tally = run_fleet(source, opts)
    doc = out.data(leaderboard(tally, source, when))
    _write(render_json(doc) if format == Format.json else render_markdown(doc), output, [])
    if tally.failed:
        out.error(f"{tally.failed} log(s) could not be analysed (listed in the report)")
    raise typer.Exit(1 if tally.groups else 2 if tally.failed else 0)


@app.command()
def signatures(
    engine: Annotated[Optional[str], typer.Option("--engine", "-e", help="Only this engine (sglang, vllm, trtllm, tgi, triton, any).")] = None,  # noqa: UP045
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.md,
    catalogue: CatalogueOpt = None,
) -> None:
    """List the catalogue's signatures."""
    from triage.commands.catalogue.show import list_json, list_markdown

    cat = _load(catalogue)
    _write(list_json(cat, engine) if format == Format.json else list_markdown(cat, engine), None, [])


@app.command()
def show(
    signature_id: Annotated[str, typer.Argument(metavar="ID", help="Signature (or workaround) id.")],
    catalogue: CatalogueOpt = None,
) -> None:
    """Print one signature with its workarounds, as a person wants to read it."""
    from triage.commands.catalogue.show import show_markdown

    _write(show_markdown(_load(catalogue), signature_id), None, [])


@catalogue_app.command("check")
def catalogue_check(
    directory: Annotated[Optional[Path], typer.Argument(help="Check only this catalogue directory (default: the built-in one).")] = None,  # noqa: UP045
    catalogue: CatalogueOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only problems and the summary.")] = False,
) -> None:
    """Validate every entry and run every example; exit 1 on any problem."""
    from triage.commands.catalogue.check import check

    dirs = [str(directory)] if directory is not None else None
    problems, summary = check(dirs, [str(p) for p in catalogue or []], verbose=not quiet)
    _write(summary, None, [])
    raise typer.Exit(1 if problems else 0)


@catalogue_app.command("backtest")
def catalogue_backtest(
    corpus: Annotated[Path, typer.Argument(help="A corpus directory: cases/<id>.log with cases/<id>.yaml labels.")],
    catalogue: CatalogueOpt = None,
    against: Annotated[Optional[str], typer.Option("--against", help="A git revision of the catalogue, or another catalogue directory: show per case what changed.")] = None,  # noqa: UP045
    split: Annotated[str, typer.Option("--split", metavar="dev|test|all", help="Which cases to run.")] = "all",
    format: Annotated[Format, typer.Option("--format", "-f", help="md (default) or json.")] = Format.md,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Processes to use (0: one per core).")] = 0,
    min_detected: Annotated[Optional[float], typer.Option("--min-detected", help="Exit 1 below this percentage.")] = None,  # noqa: UP045
    min_exception: Annotated[Optional[float], typer.Option("--min-exception")] = None,  # noqa: UP045
    min_recognised: Annotated[Optional[float], typer.Option("--min-recognised")] = None,  # noqa: UP045
    min_right1: Annotated[Optional[float], typer.Option("--min-right1")] = None,  # noqa: UP045
    min_fix1: Annotated[Optional[float], typer.Option("--min-fix1")] = None,  # noqa: UP045
    min_fixany: Annotated[Optional[float], typer.Option("--min-fixany")] = None,  # noqa: UP045
    min_clean: Annotated[Optional[float], typer.Option("--min-clean")] = None,  # noqa: UP045
) -> None:
    """Run the pipeline on every case of a labelled corpus and score it; exit 1 below a --min-* threshold."""
    from triage.commands.catalogue import backtest_out
    from triage.commands.catalogue.backtest import backtest, failed_thresholds

    if split not in ("dev", "test", "all"):
        raise TriageError(f"--split {split}: expected dev, test or all")
    if jobs < 0:
        raise TriageError(f"--jobs {jobs}: expected 0 (one per core) or more")
    result = backtest(str(corpus), split, [str(p) for p in catalogue or []], against, jobs)
    minimums = {k: v for k, v in (("detected", min_detected), ("exception", min_exception),
                                  ("recognised", min_recognised), ("right1", min_right1), ("fix1", min_fix1),
                                  ("fixany", min_fixany), ("clean", min_clean)) if v is not None}
    failed = failed_thresholds(result, minimums)
    render = backtest_out.render_json if format == Format.json else backtest_out.render_markdown
    _write(render(result, failed), None, [])
    raise typer.Exit(1 if failed else 0)


@app.command()
def watch(
    log: Annotated[str, typer.Argument(help="The server's log file; it may not exist yet, and may be truncated or rotated.")],
    timeout: TimeoutOpt = None,
    until: Annotated[str, typer.Option("--until", metavar="ready|exit", help="ready: stop when the server is ready (exit 0); exit: keep watching it serve until a failure or the timeout.")] = "ready",
    format: EventFormatOpt = Format.md,
    grace: GraceOpt = 2.0,
    catalogue: CatalogueOpt = None,
    no_redact: NoRedactOpt = False,
    redact_ips: RedactIpsOpt = False,
) -> None:
    """Follow a server log as it is written: phase on stderr; ready (0), failure report (1), timeout (3)."""
    from triage.commands.output import use
    from triage.commands.watch import WatchOptions, watch_file

    use(redact=not no_redact, ips=redact_ips)
    opts = WatchOptions(timeout=timeout, until=until, fmt=format.value, grace=grace,
                        catalogue_dirs=[str(p) for p in catalogue or []], redact=not no_redact, redact_ips=redact_ips)
    raise typer.Exit(watch_file(log, opts))


@app.command(context_settings={"allow_interspersed_args": False})
def run(
    command: Annotated[Optional[list[str]], typer.Argument(metavar="COMMAND", help="The server's launch command.")] = None,  # noqa: UP045 - optional only for --dry-run
    log: Annotated[Optional[str], typer.Option("--log", "-l", help="Log file to write (default: triage-run-<timestamp>.log here).")] = None,  # noqa: UP045
    timeout: TimeoutOpt = None,
    format: EventFormatOpt = Format.md,
    grace: GraceOpt = 2.0,
    catalogue: CatalogueOpt = None,
    no_redact: NoRedactOpt = False,
    redact_ips: RedactIpsOpt = False,
    retry: Annotated[Optional[int], typer.Option("--retry", metavar="N", help="When the server dies of a known failure with a workaround that can be applied automatically, relaunch it with that workaround, at most N times; then summarise (docs/watch.md).")] = None,  # noqa: UP045
    until: Annotated[Optional[str], typer.Option("--until", metavar="ready|exit", help="With --retry. ready (default): an attempt holds once ready, and is left running; exit: it holds by serving until it exits cleanly or you stop it.")] = None,  # noqa: UP045
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --retry: print the changes that would be made for the failure in the existing --log FILE, in order; start nothing.")] = False,
) -> None:
    """Start a server, tee its output to the terminal and a log, and watch it; exit with its status."""
    from triage.commands.output import use
    from triage.commands.watch import WatchOptions

    use(redact=not no_redact, ips=redact_ips)
    if retry is None and (until is not None or dry_run):
        raise TriageError("--until and --dry-run go with --retry N")
    opts = WatchOptions(timeout=timeout, until=until or ("ready" if retry is not None else "exit"), fmt=format.value,
                        grace=grace, catalogue_dirs=[str(p) for p in catalogue or []], redact=not no_redact,
                        redact_ips=redact_ips)
    if retry is None:
        from triage.commands.run import run_command

        raise typer.Exit(run_command(command or [], log, opts))
    from triage.commands.retry.loop import plan_from_log, retry_command

    if dry_run:
        if log is None:
            raise TriageError("--dry-run reads the log of a failed server: give it with --log FILE")
        raise typer.Exit(plan_from_log(log, command or [], opts, retry))
    raise typer.Exit(retry_command(command or [], log, opts, retry))


@app.command()
def new(
    log: Annotated[str, typer.Argument(help="The log with the unknown failure; '-' reads stdin.")],
    failure: Annotated[Optional[int], typer.Option("--failure", "-n", help="Failure number in the report (1-based; default: the first one no specific signature explains).")] = None,  # noqa: UP045
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the skeleton to this new file.")] = None,  # noqa: UP045
    catalogue: CatalogueOpt = None,
) -> None:
    """Write a catalogue signature skeleton for an unknown failure (fill in its TODOs)."""
    from triage.commands.new import first_unknown, skeleton
    from triage.commands.output import use
    from triage.pipeline.analyze import analyze as run

    # the excerpt becomes a catalogue example, which gets committed and shared: always redacted
    report = use(redact=True).report(run(log, _load(catalogue)))
    if not report.failures:
        raise TriageError(f"{log}: no failure found, nothing to describe")
    if failure is None:
        index = first_unknown(report)
        if index is None:
            raise TriageError(f"{log}: every failure already has a specific signature (pick one with --failure N)")
    elif not 1 <= failure <= len(report.failures):
        raise TriageError(f"--failure {failure}: the report has {len(report.failures)} failure(s)")
    else:
        index = failure - 1
    if output is not None:
        if log != "-" and Path(log).resolve() == output.resolve():
            raise TriageError(f"--output {output} is the input log; refusing to overwrite it")
        if output.exists():
            raise TriageError(f"--output {output} exists; refusing to overwrite it")
    _write(skeleton(report, index), output, [log])


Classes = tuple[type[BaseException], ...]


def _click_exceptions() -> tuple[Classes, Classes, Classes]:
    """(Exit, Abort, usage error) classes: typer raises its own or click's, by version
    (newer typer vendors click as typer._click and no longer installs click)."""
    exits: list[type[BaseException]] = [typer.Exit]
    aborts: list[type[BaseException]] = [typer.Abort]
    usage: list[type[BaseException]] = [typer.TyperException]
    for mod in ("typer._click.exceptions", "click.exceptions"):
        try:
            import importlib

            m = importlib.import_module(mod)
        except ImportError:
            continue
        for found, name in ((exits, "Exit"), (aborts, "Abort"), (usage, "ClickException")):
            cls = getattr(m, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found.append(cls)
    return tuple(exits), tuple(aborts), tuple(usage)


def main() -> None:
    """Entry point: one clear line on stderr for any error, never a traceback."""
    # pydantic would look for plugins among every installed distribution's entry points when
    # the first model is built (5-15 ms of a 10 KB log's run, more with many packages);
    # none is meant for triage's own models. Setting the variable, even empty, overrides this.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

    from triage.commands.output import current

    exits, aborts, usage = _click_exceptions()
    try:
        rv = app(standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except exits as e:
        code = getattr(e, "exit_code", 1)
    except aborts:
        sys.stderr.write("triage: aborted\n")
        code = 130
    except usage as e:
        msg = e.format_message() if hasattr(e, "format_message") else str(e)
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
    except BrokenPipeError:
        code = 0
    except Exception as e:  # noqa: BLE001 - the promise is: never a traceback at 3 a.m.
        if os.environ.get("TRIAGE_DEBUG"):
            raise
        current().error(f"{type(e).__name__}: {e} (set TRIAGE_DEBUG=1 for details)", prefix="triage: internal error: ")
        code = EXIT_USAGE
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()
    sys.exit(code)
