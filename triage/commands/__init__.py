"""The commands on top of the pipeline: what `triage` does for each subcommand, as library
functions that the CLI (which only parses arguments) and library users share."""
