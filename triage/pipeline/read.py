"""Open log sources (paths, `-` for stdin, `.gz`) and yield line-aligned byte chunks.

Memory stays flat: a chunk is at most CHUNK_SIZE bytes plus the tail of a line that
crossed the border. Decoding happens later, only for the lines somebody looks at.
"""

from __future__ import annotations

import gzip
import io
import os
import shlex
import stat
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

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
        return _decoded(sys.stdin.buffer, path)
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
    try:
        fh = open(p, "rb")  # noqa: SIM115 - the caller owns and closes it
    except PermissionError:
        raise TriageError(f"{path}: permission denied") from None
    except OSError as e:
        raise TriageError(f"{path}: cannot open ({e.strerror or e})") from None
    return _decoded(fh, path)


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


def _decoded(fh: BinaryIO, name: str) -> BinaryIO:
    head = _head(fh, 2)
    if head == GZIP_MAGIC:
        fh = _open_gzip(fh)
        try:
            head = _head(fh, UTF16_PROBE)
        except _decompress_errors() as e:
            fh.close()
            raise _corrupt(name, e) from None
    else:
        head = _head(fh, UTF16_PROBE)
    enc = utf16_encoding(head)
    return Utf16ToUtf8(fh, enc) if enc else fh  # type: ignore[return-value]


UTF16_PROBE = 256


def utf16_encoding(head: bytes) -> str | None:
    """'utf-16' (BOM) / 'utf-16-le' / 'utf-16-be' when the data looks like UTF-16, else None.

    Without a BOM, ASCII text in UTF-16 has a NUL in every other byte; a UTF-8 log (even one
    with NUL bytes in it) does not, so most of the probe's even or odd bytes must be NUL."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") and not head.startswith(b"\xff\xfe\x00\x00"):
        return "utf-16"
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


class Utf16ToUtf8(io.RawIOBase):
    """A UTF-16 stream read as UTF-8, block by block (an incremental decoder: a character
    split between two blocks is not lost). Unpaired surrogates become U+FFFD."""

    def __init__(self, stream: BinaryIO, encoding: str, block: int = 1 << 20) -> None:
        import codecs

        self._stream = stream
        self._dec = codecs.getincrementaldecoder(encoding)("replace")
        self._block = block
        self._pending = b""
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._pending and not self._eof:
            data = self._stream.read(self._block)
            if not data:
                self._eof = True
                self._pending = self._dec.decode(b"", final=True).encode("utf-8", "replace")
            else:
                self._pending = self._dec.decode(data).encode("utf-8", "replace")
        k = min(len(b), len(self._pending))
        b[:k] = self._pending[:k]
        self._pending = self._pending[k:]
        return k

    def close(self) -> None:
        self._stream.close()
        super().close()


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
            if isinstance(stream, (io.BufferedReader, io.FileIO)):
                raise TriageError(f"{name}: read error ({getattr(e, 'strerror', None) or e})") from None
            raise _corrupt(name, e) from None
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


def _corrupt(name: str, e: BaseException) -> TriageError:
    return TriageError(f"{name}: compressed data is truncated or corrupt ({e}); to analyse the "
                       f"readable part: gzip -dc {shlex.quote(name)} | triage analyze -")


def _snapshot_size(stream: BinaryIO) -> int | None:
    """Bytes left in a plain regular file (not a decompressor, pipe or terminal), else None."""
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
