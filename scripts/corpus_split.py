#!/usr/bin/env python3
"""Which split a corpus thread belongs to: `dev` or `test`, fixed by the thread's URL alone.

The split is decided by a hash of the normalised thread URL, so it is fixed before any
signature is written and cannot be moved to suit a result (tests/test_corpus.py checks every
label against this rule). About 30% of threads land in `test`.

usage: corpus_split.py URL [URL ...]
"""

from __future__ import annotations

import hashlib
import sys

TEST_PERCENT = 30


def thread_key(url: str) -> str:
    """The thread a URL points into: scheme, query, fragment and trailing parts dropped."""
    u = url.strip().lower().split("#", 1)[0].split("?", 1)[0].rstrip("/")
    for prefix in ("https://", "http://"):
        if u.startswith(prefix):
            u = u[len(prefix):]
    parts = u.split("/")
    # github.com/OWNER/REPO/(issues|pull|discussions)/N[/files...] -> the first five parts
    if len(parts) >= 5 and parts[0] == "github.com" and parts[3] in ("issues", "pull", "discussions"):
        kind = "issues" if parts[3] == "pull" else parts[3]  # one thread, whichever URL form
        return "/".join([parts[0], parts[1], parts[2], kind, parts[4]])
    return u


def split_of(url: str) -> str:
    digest = hashlib.sha256(thread_key(url).encode()).hexdigest()
    return "test" if int(digest[:8], 16) % 100 < TEST_PERCENT else "dev"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    for arg in sys.argv[1:]:
        print(f"{split_of(arg)}\t{arg}")
