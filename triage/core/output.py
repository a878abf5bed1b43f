"""Write a report to `-o FILE` without ever harming another file.

- An input is never overwritten: the output is refused when it is one of the inputs by path
  (relative or absolute, through symlinks) or by identity (a hard link to it).
- A regular file (or a new one) is replaced atomically: the text goes to a temporary file
  created exclusively (O_EXCL, mode 0600, a random name) in the target directory, so a symlink
  planted at a predictable temporary name is never followed, then is renamed over the target.
  A symlink given as the output is replaced by the report, its target is left alone.
- Anything else that exists (/dev/null, /dev/stdout, a FIFO, a terminal) is written to as a
  stream: renaming a file over /dev/null would replace the device node itself.
- A file written as it happens (`watch -o`, `run -o`, `run --log` and its attempt logs) cannot
  be renamed into place at the end, so `open_stream` opens the name itself without following a
  symlink: a symlink there is replaced by a new file (created exclusively), a regular file is
  truncated, a device or FIFO is written to. A plain open() followed a symlink planted at the
  name (a predictable `triage-run-<timestamp>.log` in a shared directory) onto any file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Any

from triage.core.errors import TriageError


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def refuse_inputs(output: Path, inputs: list[str]) -> None:
    out = output.resolve()
    try:
        out_st: os.stat_result | None = os.stat(out)
    except OSError:
        out_st = None
    for i in inputs:
        if i == "-" or not Path(i).exists():
            continue
        same_path = Path(i).resolve() == out
        same_file = out_st is not None and stat.S_ISREG(out_st.st_mode) and _same(os.stat(i), out_st)
        if same_path or same_file:
            raise TriageError(f"--output {output} is one of the inputs; refusing to overwrite it")


def write_output(text: str, output: Path, inputs: list[str]) -> None:
    refuse_inputs(output, inputs)
    data = text.encode("utf-8")
    try:
        st = os.stat(output)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise TriageError(f"{output}: cannot write ({e.strerror or e})") from None
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            if stat.S_ISDIR(st.st_mode):
                raise TriageError(f"{output}: is a directory")
            with open(output, "wb") as fh:  # a device or a FIFO: a stream, not a file to replace
                fh.write(data)
            return
        _replace(data, output)
    except OSError as e:
        raise TriageError(f"{output}: cannot write ({e.strerror or e})") from None


def _replace(data: bytes, output: Path) -> None:
    target = Path(os.path.abspath(output))  # the name itself: a symlink there is replaced, not followed
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".triage-tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fh.fileno(), 0o666 & ~umask)  # what open() would have given a new file
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_stream(path: str | Path, mode: str = "wb", **kw: Any) -> IO[Any]:
    """`path` opened for writing from the start (os.fdopen's `mode` and keywords), never through
    a symlink (see the module doc)."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    cloexec = getattr(os, "O_CLOEXEC", 0)
    for _ in range(8):  # a name that comes and goes between the checks: look again
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        try:
            if st is None:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | nofollow | cloexec, 0o666)
            elif stat.S_ISLNK(st.st_mode):
                os.unlink(path)  # replaced, not followed
                continue
            elif stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(21, "Is a directory")
            elif stat.S_ISREG(st.st_mode):
                fd = os.open(path, os.O_WRONLY | os.O_TRUNC | nofollow | cloexec)
            else:  # /dev/null, a FIFO, a terminal: a stream
                fd = os.open(path, os.O_WRONLY | nofollow | cloexec)
        except FileExistsError:
            continue
        except FileNotFoundError:
            if st is None:
                raise
            continue
        return os.fdopen(fd, mode, **kw)
    raise OSError(f"{path}: keeps changing while it is opened")


# The first bytes of what triage writes: reports, summaries, leaderboards, backtests, watch/run
# events. A directory given as input leaves such files out, so that a report written next to
# the logs (`analyze DIR -o DIR/r.md`, `fleet DIR -o DIR/board.md`) is not read back as a
# crashed log by the next run: it quotes the crash's lines.
OWN_HEADS = (b"# Triage: ", b"# Triage run --retry", b"# Fleet: ", b"# Backtest: ", b'{"event": "')
OWN_JSON_MAX = 64 * 1024 * 1024


def is_own_output(path: str) -> bool:
    """Whether the regular file `path` is a document triage wrote (see OWN_HEADS); its JSON
    documents (indented by two, unlike a JSON-lines log) are parsed to be sure."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if head.startswith(OWN_HEADS):
                return True
            if not head.startswith(b'{\n  "') or os.fstat(fh.fileno()).st_size > OWN_JSON_MAX:
                return False
            import json

            doc = json.loads(head + fh.read())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and ("triage_version" in doc or str(doc.get("schema", "")).startswith("triage-")
                                      or {"leaderboard", "summary", "since"} <= doc.keys()
                                      or {"corpus", "split", "cases"} <= doc.keys())
