"""What the CLI runs, on top of the pipeline and the renderers: watch, run (and retry/), many,
baseline (+ novel), new, phases, and the `triage catalogue` subcommands in catalogue/."""
