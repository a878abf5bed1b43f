"""A minimal valid catalogue entry (signature + workaround) that hostile-catalogue tests
bend one field at a time: {pattern} and {example} are filled in by each test."""

SIG = """\
id: my-frobnicator-exploded
title: The frobnicator exploded
engine: any
layer: test
severity: crash
confidence: 0.9
keywords: ["frobnicator exploded"]
patterns:
  - '{pattern}'
explanation: |
  The frobnicator exploded while serving; this is a test entry for hostile catalogues.
workarounds: [my-restart-frobnicator]
references: ["https://github.com/example/example/issues/1"]
examples:
  match: ["RuntimeError: frobnicator exploded {example}"]
  no_match: ["frobnicator exploded? no"]
open_issue: https://github.com/example/example/issues/1
"""
WK = """\
id: my-restart-frobnicator
engine: any
title: Restart the frobnicator
action: restart the frobnicator
cost: A few seconds of downtime while it restarts.
auto: false
"""
