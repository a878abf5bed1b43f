"""`triage catalogue check | show | backtest`: commands about the catalogue that run the pipeline
or the renderers, so they live above both (the catalogue itself is triage/catalogue/)."""
