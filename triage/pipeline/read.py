"""Open log sources (paths, `-` for stdin, `.gz`) and yield line-aligned byte chunks.

Memory stays flat: a chunk is at most CHUNK_SIZE bytes plus the tail of a line that
crossed the border. Decoding happens later, only for the lines somebody looks at.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import shlex
import stat
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

from triage.core.errors import TriageError

CHUNK_SIZE = 8 * 1024 * 1024
# A single line longer than this is cut (the rest is skipped up to the next newline), so a
# 100 MB line without a newline cannot blow up memory or regex time.
MAX_LINE = 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"

def _decompress_errors() -> tuple[type[BaseException], ...]:
    """What a broken compressed stream raises while being read: the stdlib's, and python-isal's
    once its reader was opened (importing isal for a plain log was a cost of every run)."""
    errors: tuple[type[BaseException], ...] = (EOFError, gzip.BadGzipFile, zlib.error, OSError)
    for module, attr in (("lzma", "LZMAError"), ("zipfile", "BadZipFile"), ("zstandard", "ZstdError")):
        loaded = sys.modules.get(module)  # only once that reader was opened
        if loaded is not None and hasattr(loaded, attr):
            errors += (getattr(loaded, attr),)
    if "lz4.frame" in sys.modules:
        errors += (RuntimeError,)  # lz4's frame reader raises RuntimeError on a broken frame
    isal = sys.modules.get("isal.isal_zlib")
    if isal is not None:
        # the stub declares `error` an instance; it is the exception class
        errors += (cast("type[BaseException]", isal.error),)
    return errors


def _open_gzip(raw: BinaryIO) -> BinaryIO:
    try:
        from isal import igzip  # fastest reader when installed

        return igzip.IGzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    except ImportError:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]


def open_source(path: str) -> BinaryIO:
    """Open a path (or `-`) for binary reading. gzip is detected by its magic bytes and UTF-16
    by its BOM or NUL-interleaved ASCII; both are undone here, so the scan only sees UTF-8.

    Pipes, FIFOs and process substitutions (`<(cat log)`, `/dev/stdin`) are read as streams:
    nothing here seeks. A character or block device is refused: `/dev/zero` or a terminal
    never ends, and no log is written to one."""
    if path == "-":
        # a shell started with stdin closed (`<&-`, some daemons) gives Python no sys.stdin
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is None:
            raise TriageError("-: stdin is closed; give a log file, or pipe a log in: ... | triage analyze -")
        return _decoded(buffer, path)
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise TriageError(f"{path}: no such file") from None
    except PermissionError:
        raise TriageError(f"{path}: permission denied") from None
    except OSError as e:
        raise TriageError(f"{path}: cannot open ({e.strerror or e})") from None
    if stat.S_ISDIR(st.st_mode):
        raise TriageError(f"{path}: is a directory")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        raise TriageError(f"{path}: is a device, not a log file (to read a stream, pipe it: ... | triage analyze -)")
    if stat.S_ISFIFO(st.st_mode) and not os.path.realpath(path).startswith("pipe:"):
        return _decoded(_open_fifo(path), path)
    try:
        fh = open(p, "rb")  # noqa: SIM115 - the caller owns and closes it
    except PermissionError:
        raise TriageError(f"{path}: permission denied") from None
    except OSError as e:
        raise TriageError(f"{path}: cannot open ({e.strerror or e})") from None
    return _decoded(fh, path)


class _Blocks(io.RawIOBase):
    """A readable stream made block by block from another (decoded, translated, prefixed):
    `_next_block` gives the next bytes (possibly none yet), None at the end."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._pending = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def _next_block(self) -> bytes | None:
        raise NotImplementedError

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._pending and not self._done:
            block = self._next_block()
            if block is None:
                self._done = True
            else:
                self._pending = block
        k = min(len(b), len(self._pending))
        b[:k] = self._pending[:k]
        self._pending = self._pending[k:]
        return k

    def close(self) -> None:
        self._stream.close()
        super().close()


FIFO_WAIT = 10.0  # seconds a named FIFO gets for a writer to open it


def _open_fifo(path: str) -> BinaryIO:
    """A named FIFO (`mkfifo`) read once a writer has opened it. A plain open() waits for a
    writer forever, and so did `triage analyze FIFO` when none came: here the FIFO is opened
    without waiting, and a writer must show up within FIFO_WAIT seconds. (A process
    substitution, `<(cat log)`, is an anonymous pipe whose writer exists: opened as a file.)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise TriageError(f"{path}: cannot open ({e.strerror or e})") from None
    first = b""
    deadline = time.monotonic() + FIFO_WAIT
    while True:
        try:
            first = os.read(fd, 1 << 16)  # data: a writer is there
        except BlockingIOError:
            break  # a writer is there and has written nothing yet
        except OSError as e:
            os.close(fd)
            raise TriageError(f"{path}: read error ({e.strerror or e})") from None
        if first:
            break
        # end of file without a writer: none has opened the FIFO yet
        if time.monotonic() >= deadline:
            os.close(fd)
            raise TriageError(f"{path}: a FIFO that no writer opened in {FIFO_WAIT:g}s; "
                              "pipe the log in instead: ... | triage analyze -")
        time.sleep(0.05)
    os.set_blocking(fd, True)
    stream = open(fd, "rb", buffering=0)  # noqa: SIM115 - the caller owns and closes it
    return cast(BinaryIO, io.BufferedReader(_Prefixed(first, stream)))


class _Prefixed(_Blocks):
    """`first`, then the rest of `stream`."""

    def __init__(self, first: bytes, stream: BinaryIO) -> None:
        super().__init__(stream)
        self._first = first

    def _next_block(self) -> bytes | None:
        first, self._first = self._first, b""
        return first or self._stream.read(1 << 16) or None

def is_regular(fh: BinaryIO) -> bool:
    """A plain regular file opened here (no decoder in between): it can be sized, seeked and
    split between processes."""
    if type(fh) not in (io.BufferedReader, io.FileIO):
        return False
    try:
        return stat.S_ISREG(os.fstat(fh.fileno()).st_mode)
    except (OSError, ValueError, io.UnsupportedOperation):
        return False


def _head(fh: BinaryIO, n: int) -> bytes:
    """The first n bytes without consuming them: a seek back on a regular file, a peek into
    the buffer on a stream (a pipe cannot seek)."""
    if is_regular(fh):
        pos = fh.tell()
        data = fh.read(n)
        fh.seek(pos)
        return data
    peek = getattr(fh, "peek", None)
    return peek(n)[:n] if peek is not None else b""


# Compressed formats by their magic bytes (never by the suffix alone: a renamed file, or stdin,
# has none): (magic, name, the command that decompresses it to stdout). Scanned as text, their
# bytes read as "no failure found", or worse a failure made up from binary noise.
COMPRESSED = (
    (GZIP_MAGIC, "gzip", "gzip -dc"),
    (b"\xfd7zXZ\x00", "xz", "xz -dc"),
    (b"BZh", "bzip2", "bzip2 -dc"),
    (b"\x28\xb5\x2f\xfd", "zstd", "zstd -dc"),
    (b"\x04\x22\x4d\x18", "lz4", "lz4 -dc"),
    (b"PK\x03\x04", "zip", "unzip -p"),
)


def compression_of(head: bytes) -> tuple[str, str] | None:
    """(format, decompress command) of data starting with `head`, or None for plain data."""
    for magic, fmt, tool in COMPRESSED:
        if head.startswith(magic) and (fmt != "bzip2" or head[3:4] in b"123456789" and len(head) > 3):
            return fmt, tool
    return None


def _decompressor(fh: BinaryIO, fmt: str, name: str) -> BinaryIO:
    """A reader of the decompressed bytes: the standard library's for gzip, xz, bzip2 and zip;
    zstd and lz4 through their packages (`pip install 'triage[compression]'`), refused clearly
    without them."""
    if fmt == "gzip":
        return _open_gzip(fh)
    if fmt == "xz":
        import lzma

        return cast(BinaryIO, lzma.LZMAFile(fh))
    if fmt == "bzip2":
        import bz2

        return cast(BinaryIO, bz2.BZ2File(fh))
    if fmt == "zip":
        return _open_zip(fh, name)
    try:
        if fmt == "zstd":
            import zstandard

            return cast(BinaryIO, io.BufferedReader(_Zstd(fh, zstandard)))
        import lz4.frame

        return cast(BinaryIO, lz4.frame.LZ4FrameFile(fh))
    except ImportError:
        fh.close()
        package = "zstandard" if fmt == "zstd" else "lz4"
        raise TriageError(f"{name}: a {fmt}-compressed log, and the {package} package is not installed "
                          f"(pip install 'triage[compression]'); or: {fmt} -dc {shlex.quote(name)} | triage analyze -") from None


def _open_zip(fh: BinaryIO, name: str) -> BinaryIO:
    """The one file of a zip archive (a log zipped on its own, as a browser or a ticket
    attachment gives it); an archive of several files is refused: which one is the log?"""
    import zipfile

    if not is_regular(fh):
        fh.close()
        raise TriageError(f"{name}: a zip archive cannot be read from a pipe; give the file, or: unzip -p FILE | triage analyze -")
    try:
        archive = zipfile.ZipFile(fh)
        members = [m for m in archive.infolist() if not m.is_dir()]
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        fh.close()
        raise _corrupt(name, e, "unzip -p") from None
    if len(members) != 1:
        archive.close()
        fh.close()
        raise TriageError(f"{name}: a zip archive of {len(members)} files; extract it and analyse the "
                          f"directory: unzip -d DIR {shlex.quote(name)} && triage analyze DIR")
    try:
        return cast(BinaryIO, io.BufferedReader(_Reads(cast(BinaryIO, archive.open(members[0])), archive)))
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError) as e:  # encrypted, unknown method
        archive.close()
        fh.close()
        raise TriageError(f"{name}: cannot read {members[0].filename!r} in this zip archive ({e})") from None


class _Zstd(_Blocks):
    """zstd frames decompressed block by block. zstandard's stream reader ends a truncated frame
    in silence (a cut log read as "no failure found"); here a frame not finished at the end of
    the data is an error, as gzip's is. Frames one after another (pzstd) are all read."""

    def __init__(self, stream: BinaryIO, zstandard: Any) -> None:  # noqa: ANN401 - the module
        super().__init__(stream)
        self._new = zstandard.ZstdDecompressor().decompressobj
        self._dobj = self._new()
        self._started = False

    def _next_block(self) -> bytes | None:
        data = self._stream.read(1 << 20)
        if not data:
            if self._started and not self._dobj.eof:
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
            return None
        out = []
        while data:
            if self._dobj.eof:  # the next frame
                self._dobj = self._new()
            self._started = True
            out.append(self._dobj.decompress(data))
            data = self._dobj.unused_data if self._dobj.eof else b""
        return b"".join(out)


class _Reads(_Blocks):
    """Another reader's bytes as a plain raw stream (a zip member has not all that the readers
    here ask of a stream); `closing`: what to close with it (the archive and the file under it)."""

    def __init__(self, stream: BinaryIO, closing: Any = None) -> None:  # noqa: ANN401 - a zipfile.ZipFile
        super().__init__(stream)
        self._closing = closing

    def _next_block(self) -> bytes | None:
        return self._stream.read(1 << 20) or None

    def close(self) -> None:
        super().close()
        if self._closing is not None:
            self._closing.close()
            fp = getattr(self._closing, "fp", None)
            if fp is not None:
                fp.close()

def _decoded(fh: BinaryIO, name: str) -> BinaryIO:
    try:
        return _decoding(fh, name)
    except OSError as e:  # the first read of /proc/self/mem (EIO), a disk error: one line
        fh.close()
        raise TriageError(f"{name}: read error ({e.strerror or e})") from None


def _decoding(fh: BinaryIO, name: str) -> BinaryIO:
    found = compression_of(_head(fh, 8))
    if found is not None:
        fmt, tool = found
        fh = _decompressor(fh, fmt, name)
        try:
            head = _head(fh, UTF16_PROBE)
        except _decompress_errors() as e:
            fh.close()
            raise _corrupt(name, e, tool) from None
    else:
        head = _head(fh, UTF16_PROBE)
    enc = utf16_encoding(head)
    if enc:
        fh = cast(BinaryIO, io.BufferedReader(Utf16ToUtf8(fh, enc)))  # buffered: peeked below
    if _cr_only(_head(fh, CR_PROBE)):
        fh = cast(BinaryIO, io.BufferedReader(CrToLf(fh)))
    return fh


CR_PROBE = 64 * 1024


def _cr_only(head: bytes) -> bool:
    """Old Mac line ends (CR alone): lines end in CR and no LF comes. A progress bar's CRs sit
    between LFs, so one LF in the probe keeps the data as it is."""
    return head.count(b"\r") >= 2 and b"\n" not in head


class CrToLf(_Blocks):
    """A stream whose lines end in CR alone, read with LF line ends (a CR before an LF stays:
    a CRLF line is one line whatever comes later in the file)."""

    def __init__(self, stream: BinaryIO, block: int = 1 << 20) -> None:
        super().__init__(stream)
        self._block = block
        self._held = b""  # a CR at the end of a block: whether an LF follows is in the next one

    def _next_block(self) -> bytes | None:
        data = self._stream.read(self._block)
        if not data:
            held, self._held = self._held, b""
            return held.replace(b"\r", b"\n") or None
        data = self._held + data
        self._held = b"\r" if data.endswith(b"\r") else b""
        return re.sub(rb"\r(?!\n)", b"\n", data[:-1] if self._held else data)

UTF16_PROBE = 256


def utf16_encoding(head: bytes) -> str | None:
    """'utf-16' (BOM) / 'utf-16-le' / 'utf-16-be' when the data looks like UTF-16, else None.

    Without a BOM, ASCII text in UTF-16 has a NUL in every other byte; a UTF-8 log (even one
    with NUL bytes in it) does not, so most of the probe's even or odd bytes must be NUL."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") and not head.startswith(b"\xff\xfe\x00\x00"):
        # a BOM is a guess too: two stray bytes before a UTF-8 log (a tool's bad concatenation)
        # are not UTF-16, and decoding the log as UTF-16 would lose its crash
        return None if _UTF8_RUN.match(head, 2) else "utf-16"
    pairs = len(head) // 2
    if pairs < 8:
        return None
    odd_nul = head[1 : 2 * pairs : 2].count(0)
    even_nul = head[0 : 2 * pairs : 2].count(0)
    if odd_nul >= 0.9 * pairs and even_nul == 0:
        return "utf-16-le"
    if even_nul >= 0.9 * pairs and odd_nul == 0:
        return "utf-16-be"
    return None


# Printable ASCII bytes in a row: in UTF-16 text every ASCII character has a NUL beside it, so
# such a run means the bytes are UTF-8 (or ASCII) again. 16 CJK characters whose both bytes are
# printable would pass for one: about one chance in ten million per position.
_UTF8_RUN = re.compile(rb"[\t\n\r\x20-\x7e]{32}")


class Utf16ToUtf8(_Blocks):
    """A UTF-16 stream read as UTF-8, block by block (an incremental decoder: a character
    split between two blocks is not lost). Unpaired surrogates become U+FFFD.

    The guess is checked as the data comes: from the first run of plain UTF-8 bytes on (a
    PowerShell-written head, then a UTF-8 process appending to the same file), the bytes pass
    through as they are, so the crash at the end is read as written."""

    def __init__(self, stream: BinaryIO, encoding: str, block: int = 1 << 20) -> None:
        import codecs

        super().__init__(stream)
        self._dec = codecs.getincrementaldecoder(encoding)("replace")
        self._block = block
        self._raw = False  # UTF-8 from here on
        self._ended = False

    def _next_block(self) -> bytes | None:
        if self._ended:
            return None
        data = self._stream.read(self._block)
        if self._raw:
            return data or None
        if not data:
            self._ended = True
            return self._dec.decode(b"", final=True).encode("utf-8", "replace")
        run = _UTF8_RUN.search(data)
        if run is None:
            return self._dec.decode(data).encode("utf-8", "replace")
        self._raw = True
        head = self._dec.decode(data[: run.start()], final=True).encode("utf-8", "replace")
        return head + data[run.start() :]

def iter_chunks(stream: BinaryIO, size: int = CHUNK_SIZE, name: str = "input",
                limit: int | None = None) -> Iterator[bytes]:
    """Chunks (bytes) that each end with a newline (the last one may not): iter_spans, copied
    out for callers that keep them. The hot path uses iter_spans directly."""
    for buf, n in iter_spans(stream, size, name, limit):
        yield bytes(buf[:n])


Span = tuple[bytearray, int]


def iter_spans(stream: BinaryIO, size: int = CHUNK_SIZE, name: str = "input",
               limit: int | None = None) -> Iterator[Span]:
    """Like iter_chunks, without the copies: yields (buffer, n), the chunk being buffer[:n].

    One buffer is read into again and again (readinto), so a gigabyte costs no allocation
    and no fresh pages per chunk; the caller must be done with a span before asking for the
    next one.

    At most `limit` bytes are read when given (a byte range of a file). Without one, a plain
    regular file is read up to the size it had when reading started: a file that is still
    being written is analysed as a snapshot and the read always ends. A line longer than
    MAX_LINE is cut there and the rest of it skipped, so one pathological line costs neither
    memory nor regex time.

    A truncated or corrupt compressed stream ends the run with one clear error (exit 2)
    rather than a partial report: the crash is usually at the end, in the part that is lost,
    and a report of the readable head alone would say "no failure found".
    """
    if limit is None:
        limit = _snapshot_size(stream)
    # a small file gets a buffer its size: a fresh bytearray is zeroed page by page, and 9 MiB
    # of that was a tenth of the start-up of `triage analyze` on a 10 KB log
    buf = bytearray((size if limit is None else min(size, limit)) + MAX_LINE + 1)
    carry = 0  # bytes of an unfinished line at the start of buf
    skipping = False  # inside the tail of an over-long line
    left = limit
    while True:
        want = size if left is None else min(size, left)
        if want <= 0:
            break
        try:
            with memoryview(buf) as mv:
                got = stream.readinto(mv[carry : carry + want])  # type: ignore[attr-defined]
        except _decompress_errors() as e:
            # a file read as it is (not a decoder, which may be wrapped in a BufferedReader too)
            raw = getattr(stream, "raw", stream)
            if isinstance(raw, io.FileIO):
                raise TriageError(f"{name}: read error ({getattr(e, 'strerror', None) or e})") from None
            raise _corrupt(name, e, _tool_for(name)) from None
        if not got:
            break
        if left is not None:
            left -= got
        end = carry + got
        if skipping:
            nl = buf.find(b"\n", carry, end)
            if nl < 0:
                continue  # still inside the over-long line: drop what was read
            skipping = False
            rest = end - (nl + 1)
            buf[carry] = 10  # the cut line ends here
            buf[carry + 1 : carry + 1 + rest] = buf[nl + 1 : end]
            end = carry + 1 + rest
        cut = buf.rfind(b"\n", 0, end)
        if cut < 0:
            carry = end
            if carry > MAX_LINE:
                carry = MAX_LINE
                skipping = True
            continue
        yield buf, cut + 1
        tail = end - (cut + 1)
        buf[:tail] = buf[cut + 1 : end]
        carry = tail
    if carry:
        yield buf, carry


def _tool_for(name: str) -> str:
    """The command that decompresses the file `name` (by its magic bytes), for an error's hint."""
    found = None
    try:
        if os.path.isfile(name):  # never open a FIFO here: it would block
            with open(name, "rb") as fh:
                found = compression_of(fh.read(8))
    except OSError:
        pass
    return found[1] if found is not None else "gzip -dc"


def _corrupt(name: str, e: BaseException, tool: str = "gzip -dc") -> TriageError:
    return TriageError(f"{name}: compressed data is truncated or corrupt ({e}); to analyse the "
                       f"readable part: {tool} {shlex.quote(name)} | triage analyze -")


def _snapshot_size(stream: BinaryIO) -> int | None:
    """Bytes left in a plain regular file (not a decompressor, pipe or terminal) or in an
    in-memory log (analyze_text: a catalogue example's 200 bytes had a 9 MiB buffer zeroed,
    1.4 ms of each of `catalogue check`'s 830 examples), else None."""
    if type(stream) is io.BytesIO:
        with stream.getbuffer() as view:  # released at once: a held view would pin the buffer
            return max(0, view.nbytes - stream.tell())
    if type(stream) not in (io.BufferedReader, io.FileIO):
        return None
    try:
        st = os.fstat(stream.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return max(0, st.st_size - stream.tell())
    except (OSError, ValueError, io.UnsupportedOperation):
        return None


def file_size(path: str) -> int | None:
    if path == "-":
        return None
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def read_text(path: str) -> str:
    """Whole-text read for small inputs (catalogue examples, tests)."""
    with open_source(path) as fh:
        data = b"".join(iter_chunks(fh, name=path))
    return data.decode("utf-8", "replace")


class Prefetch(io.RawIOBase):
    """Reads a slow stream (a decompressor) in a background thread, a few blocks ahead.

    Decompression releases the GIL, so inflating the next block overlaps with scanning the
    current one, as `zcat | rg` overlaps two processes. Errors of the reader thread are
    raised to the consumer at the point where the data would have been.
    """

    def __init__(self, stream: BinaryIO, block: int = CHUNK_SIZE, depth: int = 3) -> None:
        import queue
        import threading

        self._q: queue.Queue[bytes | BaseException | None] = queue.Queue(depth)
        self._pending = memoryview(b"")
        self._done = False
        self._stream = stream

        def pump() -> None:
            try:
                while True:
                    data = stream.read(block)
                    if not data:
                        break
                    self._q.put(data)
                self._q.put(None)
            except BaseException as e:  # noqa: BLE001 - handed to the consumer, not lost
                self._q.put(e)

        self._thread = threading.Thread(target=pump, name="triage-prefetch", daemon=True)
        self._thread.start()

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        n, want = 0, len(b)
        while n < want:
            if not self._pending:
                if self._done:
                    break
                item = self._q.get()
                if item is None:
                    self._done = True
                    break
                if isinstance(item, BaseException):
                    self._done = True
                    raise item
                self._pending = memoryview(item)
            k = min(want - n, len(self._pending))
            b[n : n + k] = self._pending[:k]
            self._pending = self._pending[k:]
            n += k
        return n

    def close(self) -> None:
        self._stream.close()
        super().close()
