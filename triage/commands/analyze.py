"""`triage analyze`: logs in; reports, their summary, the rendered text and the exit code out.

The CLI and `triage.analyze` both come through here, so that one log or many, with or without
a baseline, redacted or not, give the same reports whoever asks.
"""

from __future__ import annotations

import glob
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.catalogue.load import Catalogue, load_catalogue
from triage.commands.many import Summary, summarise
from triage.commands.output import Output, normalise_format
from triage.core.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, TriageError
from triage.core.models import Report
from triage.pipeline.analyze import Options

log = logging.getLogger("triage")

# The JSON contract's name and version; bumped only when a field changes meaning or goes away.
SCHEMA = "triage-report/2"
@dataclass
class Analysis:
    """The reports of one `analyze` call, the logs that could not be read, and the inputs."""

    reports: list[Report]
    errors: dict[str, str] = field(default_factory=dict)  # log -> why it could not be analysed
    paths: list[str] = field(default_factory=list)  # the inputs, expanded (for -o's "not onto an input")

    @property
    def summary(self) -> Summary:
        return summarise(self.reports, self.errors)

    @property
    def diagnostics(self) -> list[str]:
        """How the logs were read (e.g. the portable scanner was used), each said once."""
        return list(dict.fromkeys(d for r in self.reports for d in r.diagnostics))

    @property
    def exit_code(self) -> int:
        """1 if any log shows a failure, else 2 if a log could not be read, else 0."""
        codes = [r.exit_code for r in self.reports]
        if EXIT_FAILURE in codes:
            return EXIT_FAILURE
        return EXIT_USAGE if self.errors else EXIT_OK


def expand_inputs(items: list[str]) -> list[str]:
    """Files as given; directories as the files under them; globs (quoted from the shell) expanded."""
    out: list[str] = []
    for item in items:
        if item == "-":
            out.append(item)
            continue
        p = Path(item)
        if p.is_dir():
            from triage.core.output import is_own_output

            found = sorted(str(f) for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
            # a report of an earlier run written beside the logs is not a log (it quotes the crash)
            files = [f for f in found if not is_own_output(f)]
            if not files:
                raise TriageError(f"{item}: directory holds no files" + (" but triage's own reports" if found else ""))
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


HTML_ONE_LOG = "--format html draws the report and timeline of one log: give a single LOG (fleet has no HTML)"

NOT_A_LOG = "nothing in it looks like a server log: no timestamp, no engine line, no failure"

# How much of a non-log is read to tell a binary file from text with no log line in it.
SNIFF_BYTES = 8192


def looks_like_a_log(r: Report) -> bool:
    """Whether anything in the file is what a server log holds: a failure or a catalogue match,
    a line naming the engine, a timestamp. A README or a binary beside the logs has none."""
    return bool(r.failures or r.findings or r.environment.engine or r.timeline.first_time)


def non_log_kind(path: str) -> str:
    """Why a file that holds nothing of a log is not one: "binary" (a NUL, or mostly bytes that
    are not text, in its first 8 KiB as the reader decodes them: after .gz, .xz, UTF-16) or
    "no log lines" (text: a README, notes). Only regular files are opened again."""
    from triage.pipeline.read import open_source

    if not Path(path).is_file():
        return "no log lines"
    try:
        with open_source(path) as fh:
            head = fh.read(SNIFF_BYTES)
    except Exception:  # noqa: BLE001 - it was just read whole; this only words the message
        return "no log lines"
    if b"\0" in head:
        return "binary"
    text = head.decode("utf-8", "replace")
    odd = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in "\t\n\r\f\x1b"))
    return "binary" if odd * 20 > len(text) else "no log lines"


def no_log_error(where: str, counts: Mapping[str, int], names: Mapping[str, list[str]]) -> TriageError:
    """The one line for a directory (or archive) where no file looks like a server log: how many
    files were skipped and why (`counts` by kind: "binary", "no log lines"), each reason with the
    first few of its `names`."""
    total = sum(counts.values())
    parts = []
    for kind in sorted(counts, key=lambda k: (-counts[k], k)):
        first = sorted(names.get(kind, ()))[:5]
        shown = ", ".join(Path(n).name for n in first) + (f" and {counts[kind] - len(first)} more" if counts[kind] > len(first) else "")
        what = "binary" if kind == "binary" else "text with no timestamp, engine line or failure"
        parts.append(f"{counts[kind]} {what}: {shown}")
    files = "file" if total == 1 else "files"
    return TriageError(f"{where}: no file looks like a server log; {total} {files} skipped ({'; '.join(parts)})")


def _mark_non_logs(result: Analysis, dirs: list[str]) -> None:
    """Files of a directory that hold nothing of a log are said to be so (a note on their
    report); a directory where no file does is an input error (exit 2), not "no failure"."""
    strangers = [r for r in result.reports if not looks_like_a_log(r)]
    for r in strangers:
        r.notes.insert(0, NOT_A_LOG)
    if dirs and strangers and len(strangers) == len(result.reports) and not result.errors:
        kinds: dict[str, list[str]] = {}
        for r in strangers:
            kinds.setdefault(non_log_kind(r.source), []).append(r.source)
        raise no_log_error(", ".join(dirs), {k: len(v) for k, v in kinds.items()}, kinds)


def _offset(text: str | None) -> Any:
    if text is None:
        return None
    from triage.pipeline.host.clock import parse_offset

    try:
        return parse_offset(text)
    except ValueError:
        raise TriageError(f"--host-offset {text}: expected the host clock's lead over the log's, e.g. +02:00 or -5") from None


def check_options(options: Options, jobs: int) -> None:
    """Values a run would otherwise take silently and misuse."""
    if jobs < 0:
        raise TriageError(f"--jobs {jobs}: expected 0 (one per core) or more")
    if options.version is not None:
        from packaging.version import InvalidVersion, Version

        try:
            Version(options.version)
        except InvalidVersion:
            raise TriageError(f"--engine-version {options.version}: not a version (expected e.g. 0.5.3 or 0.10.1rc1)") from None
    if options.command is not None and not options.command.strip():
        raise TriageError("--command is empty")


def analyze_logs(logs: list[str], catalogue: Catalogue | None = None, options: Options | None = None, *,
                 baseline: str | None = None, redact: bool = True, redact_ips: bool = False, jobs: int = 0,
                 with_records: list[str] | None = None, host_offset: str | None = None) -> Analysis:
    """Analyse the logs (files, directories, globs, `-`). One log that cannot be read is an
    error (TriageError); among many it is listed in `errors` and the others are still analysed.
    `with_records`: the incident's host records (kernel log, nvidia-smi, kubectl, Slurm), for a
    single log; a directory holding one log and only such records is read the same way."""
    opts = options or Options()
    check_options(opts, jobs)
    offset = _offset(host_offset)
    paths = expand_inputs(logs)
    records = list(with_records or [])
    if len(logs) == 1 and len(paths) > 1 and Path(logs[0]).is_dir():
        from triage.pipeline.host.source import bundle  # only a directory can be a bundle

        b = bundle(paths)
        if b is not None:
            paths = [b[0]]
            records += b[1]
    if records and len(paths) != 1:
        raise TriageError("--with reads the host records of one incident: give a single LOG (or a bundle directory)")
    if opts.chart and len(paths) != 1:
        raise TriageError(HTML_ONE_LOG)
    if baseline is not None and len(paths) > 1:
        raise TriageError("--baseline compares one log with one healthy log; give a single LOG")
    cat = catalogue or load_catalogue()
    started = time.monotonic()
    if len(paths) == 1:
        from triage.pipeline.analyze import analyze_file

        result = Analysis([analyze_file(paths[0], cat, opts)])
        if records:
            from triage.pipeline.host.correlate import apply, host_records

            report = result.reports[0]
            apply(report, host_records(report, paths[0], records, offset))
            if report.chart is not None:
                from triage.pipeline.chart import add_host_events

                add_host_events(report)
        if baseline is not None:
            from triage.commands.baseline import compare

            compare(result.reports[0], baseline, cat, opts)
    else:
        from triage.commands.many import analyze_many

        reports, errors = analyze_many(paths, cat, opts, jobs)
        result = Analysis(reports, errors)
    result.paths = paths
    if len(paths) > 1 or any(Path(i).is_dir() for i in logs):
        _mark_non_logs(result, [i for i in logs if i != "-" and Path(i).is_dir()])
    log.debug("analysed %d log(s) in %.2fs", len(paths), time.monotonic() - started)
    # through the one output door (commands/output.py), like every other output
    out = Output(redact=redact, ips=redact_ips)
    result.reports = [out.report(r) for r in result.reports]
    result.errors = {k: out.text(v) for k, v in result.errors.items()}
    return result


def document(result: Analysis) -> dict[str, Any]:
    """The JSON envelope as a plain dict (see commands/contract.py)."""
    from triage.core.version import __version__
    from triage.render.json_out import report_dict

    reports = [report_dict(r) for r in result.reports]
    doc: dict[str, Any] = {}
    if len(reports) == 1 and not result.errors:
        doc.update(reports[0])  # the 0.1 single-log keys, kept readable (see commands/contract.py)
    doc.update({
        "schema": SCHEMA,
        "triage_version": __version__,
        "exit_code": result.exit_code,
        "reports": reports,
        "summary": result.summary.model_dump(mode="json"),
        "failures": [f for r in reports for f in r["failures"]],
        "findings": [f for r in reports for f in r["findings"]],
    })
    return doc


def render(result: Analysis, fmt: str) -> str:
    """The report text in `markdown` (or `md`), `json`, `issue` (one log's upstream bug report)
    or `html` (one log's page with its timeline: analysed with Options(chart=True))."""
    fmt = normalise_format(fmt, ("markdown", "json", "issue", "html"))
    if fmt == "html":
        if len(result.reports) != 1 or result.errors:
            raise TriageError(HTML_ONE_LOG)
        from triage.render.html import render_html

        return render_html(result.reports[0])
    if fmt == "issue":
        if len(result.reports) != 1 or result.errors:
            raise TriageError("--format issue drafts the bug report of one log: give a single LOG")
        from triage.render.issue import render_issue

        return render_issue(result.reports[0])
    if fmt == "json":
        import json

        # ensure_ascii keeps the output valid and printable whatever bytes the log held
        return json.dumps(document(result), indent=2, ensure_ascii=True) + "\n"
    from triage.render.markdown import render_markdown  # jinja2 only when Markdown is asked for

    if len(result.reports) == 1 and not result.errors:
        return render_markdown(result.reports[0])
    from triage.commands.many import summary_markdown

    return summary_markdown(result.summary) + "".join("\n---\n\n" + render_markdown(r) for r in result.reports)
