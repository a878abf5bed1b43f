"""Every failure the engines' documentation describes (docs/documented/*.md) is recognised.

Each file holds one Markdown table with the columns
`| Doc page | Symptom | Log line | Signature | Documented remedy | Workaround |`. For every row
the signature must exist, the workaround (unless `-`) must exist and be one of that signature's
workarounds, and the log line, run through the same pipeline as `triage catalogue check` runs
the catalogue's examples, must produce that signature.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from triage.catalogue.load import load_catalogue
from triage.pipeline.analyze import Options, analyze_text

DOCUMENTED = Path(__file__).resolve().parent.parent / "docs" / "documented"
COLUMNS = ["Doc page", "Symptom", "Log line", "Signature", "Documented remedy", "Workaround"]


def _cells(line: str) -> list[str]:
    """The cells of one table row; `\\|` is a literal bar inside a cell."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def _code(cell: str) -> str:
    """The text inside the cell's backticks (one or more backticks, as Markdown allows)."""
    m = re.fullmatch(r"(`+)\s?(.*?)\s?\1", cell)
    return m.group(2) if m else cell


def parse_table(path: Path) -> list[dict[str, str]]:
    """The rows of the documented-failures table in `path`, keyed by column name."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rows: list[dict[str, str]] = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("|") and _cells(line) == COLUMNS:
            for row in lines[i + 2:]:
                if not row.lstrip().startswith("|"):
                    break
                cells = _cells(row)
                assert len(cells) == len(COLUMNS), f"{path.name}: {len(cells)} cells in row: {row[:120]}"
                rows.append(dict(zip(COLUMNS, cells, strict=True)))
            return rows
    raise AssertionError(f"{path.name}: no table with the columns {' | '.join(COLUMNS)}")


FILES = sorted(DOCUMENTED.glob("*.md"))
ROWS = [(f, n, row) for f in FILES for n, row in enumerate(parse_table(f), start=1)]


@pytest.fixture(scope="module")
def cat():
    return load_catalogue()


def test_documented_tables_exist_and_have_rows():
    assert FILES, f"no tables in {DOCUMENTED}"
    for f in FILES:
        assert parse_table(f), f"{f.name}: the table has no rows"


@pytest.mark.parametrize("path,n,row", ROWS, ids=[f"{f.stem}:{n}" for f, n, _ in ROWS])
def test_documented_failure_is_recognised(cat, path, n, row):
    where = f"{path.name} row {n}"
    # bare URLs, or Markdown links [the page's section](URL); one page or several
    assert re.search(r"(?:^|\(|<)https://\S+", row["Doc page"].strip()), f"{where}: Doc page is not a URL"
    assert row["Symptom"] and row["Documented remedy"], f"{where}: empty Symptom or Documented remedy"
    sid = row["Signature"]
    assert sid in cat.signatures, f"{where}: no signature {sid!r}"
    sig = cat.signatures[sid]
    wid = row["Workaround"]
    if wid != "-":
        assert wid in cat.workarounds, f"{where}: no workaround {wid!r}"
        assert wid in sig.spec.workarounds, f"{where}: {wid} is not among {sid}'s workarounds"
    line = _code(row["Log line"])
    assert line and "\n" not in line, f"{where}: the Log line must be one line in backticks"
    opts = Options(prefer_hyperscan=True, keep_generic=True)
    rep = analyze_text(line, cat, name=f"documented:{path.stem}:{n}", options=opts)
    got = [f.signature for f in rep.findings]
    assert sid in got, f"{where}: the log line produces {got or 'nothing'}, not {sid}"
