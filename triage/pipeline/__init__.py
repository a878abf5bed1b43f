"""The stages of `triage analyze`, in the order they run:

    read -> scan -> parse/ -> match -> hints -> recommend -> redact

analyze.py strings them together over one store of parsed lines and returns a Report. A stage
imports core, the catalogue and earlier stages, never a later one (tests/test_architecture.py).
"""
