"""`triage fleet`: a crash leaderboard over a whole log archive.

The archive is listed lazily (source), cut into batches, and every batch analysed by a worker
(worker) on the local process pool or on Ray tasks (runners). A worker hands back only the
per-group aggregates of its batch (board), which the driver merges: its memory grows with the
number of distinct failures and servers, never with the number of logs. render writes the
leaderboard as Markdown or JSON rows.
"""
