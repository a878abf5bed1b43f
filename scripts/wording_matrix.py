"""How an engine signature's patterns meet the engine's own messages, release by release.

For each SGLang, vLLM or LMDeploy signature: the messages of the engine (from the shipped source
atlas, every release from SGLang 0.3 / vLLM 0.4 on) that share one of its keywords, which of them
its patterns match, in which releases each exists, where it is raised, and what `affects` claims.
A message that shares the keywords but is not matched is the usual sign of a rewording (the
SGLang KV-leak check became `pool memory leak detected!` in 0.5.12): look at it before deciding
the signature is complete.

    python scripts/wording_matrix.py sglang-kv-pool-memory-leak-check
    python scripts/wording_matrix.py --engine vllm            # every vLLM signature
    python scripts/wording_matrix.py --engine sglang --format md > /tmp/sglang.md

Reads only the package's own data (no network); the catalogue is the checkout's `signatures/` and
`workarounds/`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from triage.catalogue.atlas import Atlas, Template, filled, make_template, span_text
from triage.catalogue.load import Catalogue, load_roots
from triage.commands.catalogue.atlas_check import ENGINES, _matches

ROOT = Path(__file__).resolve().parent.parent


def _span(versions: list[str], t: Template) -> str:
    idx = {i for s in t.sites for i in s.releases()}
    return span_text(versions, idx) if idx else "none"


def _claimed(versions: list[str], affects: str | None) -> str:
    if not affects:
        return "-"
    try:
        spec = SpecifierSet(affects)
    except InvalidSpecifier:
        return f"{affects} (not PEP 440)"
    idx = {i for i, v in enumerate(versions) if Version(v) in spec}
    return f"{affects} = {span_text(versions, idx) if idx else 'no release'}"


def rows(atlas: Atlas, cat: Catalogue, sig_id: str) -> list[str]:
    sig = cat.signatures[sig_id]
    spec = sig.spec
    if spec.engine not in ENGINES or spec.engine not in atlas.packages:
        return [f"## {sig_id}: engine {spec.engine} has no atlas; check its messages by hand"]
    versions = atlas.packages[spec.engine].versions
    keys = [k.lower() for k in spec.keywords]
    cands = [make_template(raw) for raw in atlas.stored_holding(spec.engine, keys)]
    out = [f"## {sig_id}", f"affects: {_claimed(versions, spec.affects)}; fixed_in: {spec.fixed_in or '-'}; "
           f"keywords: {spec.keywords}"]
    if not cands:
        out.append("no message of the engine's Python source holds a keyword (torch, CUDA, C++ or another "
                   "library prints it): check against threads")
        return out
    for t in sorted(cands, key=lambda t: (not _matches(sig, t), t.text))[:40]:
        mark = "MATCH " if _matches(sig, t) else "miss  "
        site = t.sites[-1]
        out.append(f"- {mark}{_span(versions, t):<28} {site.file}:{site.function}  "
                   f"{t.exception}: {filled(t.text).splitlines()[0][:150]!r}")
    if len(cands) > 40:
        out.append(f"- ... {len(cands) - 40} more messages share a keyword (narrow the keywords?)")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ids", nargs="*", help="signature ids")
    ap.add_argument("--engine", choices=ENGINES, help="every signature of this engine")
    a = ap.parse_args(argv)
    atlas = Atlas.open()
    cat = load_roots([ROOT / "signatures", ROOT / "workarounds"])
    ids = list(a.ids) + sorted(s for s, v in cat.signatures.items() if a.engine and v.spec.engine == a.engine)
    if not ids:
        ap.error("name signature ids or --engine")
    for sid in ids:
        if sid not in cat.signatures:
            print(f"error: no signature {sid!r}", file=sys.stderr)
            return 2
        print("\n".join(rows(atlas, cat, sid)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
