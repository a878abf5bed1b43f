"""`triage run --retry`: relaunch a server that died of a known failure with the workaround the
report recommends, and say whether it held.

plan.py decides which change comes next; attempt.py runs one attempt; loop.py strings the
attempts together; summary.py measures what held; triage/commands/retry/render.py renders it.
"""
