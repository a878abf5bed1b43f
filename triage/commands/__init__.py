"""What the CLI runs, on top of the pipeline and the renderers, as library functions that the
CLI (which only parses arguments) and library users share: analyze (one log or many, baseline,
redaction, rendering), watch, run (and retry/), many, baseline (+ novel), new, phases, schema,
settings, output, and the `triage catalogue` subcommands in catalogue/."""
