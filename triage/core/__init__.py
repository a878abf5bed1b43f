"""The bottom layer, importable from everywhere: the Report's types (models), errors and exit
codes, the log vocabulary several stages need, fingerprints, shell-word splitting and the
progress line. Imports nothing else from triage."""
