"""`triage schema`: JSON Schemas generated from the pydantic models, so that scripts can
validate reports and editors can validate catalogue entries while they are written.

The checked-in copies live in docs/schemas/ (scripts/gen_docs.py writes them; a test keeps
them current)."""

from __future__ import annotations

import json
from typing import Any

from triage.core.errors import TriageError

NAMES = ("report", "catalogue", "signature", "workaround")


def schema(name: str) -> dict[str, Any]:
    if name == "report":
        from triage.commands.contract import Document

        doc = Document.model_json_schema(mode="serialization", by_alias=True)
        doc["title"] = "triage analyze --format json"
    elif name in ("signature", "workaround"):
        from triage.catalogue.models import SignatureSpec, WorkaroundSpec

        model = SignatureSpec if name == "signature" else WorkaroundSpec
        doc = model.model_json_schema(mode="validation")
        doc["title"] = f"triage catalogue {name} (one YAML file under {name}s/)"
    elif name == "catalogue":
        sig, wa = schema("signature"), schema("workaround")
        defs = {**sig.pop("$defs", {}), **wa.pop("$defs", {})}
        for d in (sig, wa):
            d.pop("$schema", None)
        defs["Signature"], defs["Workaround"] = sig, wa
        doc = {"title": "triage catalogue entry (a signature or a workaround)",
               "anyOf": [{"$ref": "#/$defs/Signature"}, {"$ref": "#/$defs/Workaround"}], "$defs": defs}
    else:
        raise TriageError(f"no schema {name!r} (schemas: {', '.join(NAMES)})")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **doc}


def schema_text(name: str) -> str:
    return json.dumps(schema(name), indent=2, sort_keys=False) + "\n"
