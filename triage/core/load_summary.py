"""The load a server was under, folded by the scan from its per-batch lines and read by the
timeline and by the recommend stage's cost estimates."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LoadSummary:
    """Load figures accumulated over a log's load lines: the peak and the prefix cache's tokens."""

    peak_running: int = 0
    peak_line: int | None = None
    new_tokens: int = 0
    cached_tokens: int = 0
    prefill_lines: int = 0
    vllm_hit_rates: list[float] = field(default_factory=list)
    # >0: the prefill figures are those of the window of this many bytes before the failure
    # (pipeline/prefill.py), which began after the log's start; 0: the whole log up to it
    prefill_window: int = 0

    def copy(self) -> LoadSummary:
        return LoadSummary(self.peak_running, self.peak_line, self.new_tokens, self.cached_tokens,
                           self.prefill_lines, list(self.vllm_hit_rates), self.prefill_window)

    def prefix_hit(self) -> tuple[int, int, float] | None:
        """(cached tokens, prompt tokens, hit rate in %) from the prefill lines, or None when
        the log printed none that counted a token."""
        total = self.new_tokens + self.cached_tokens
        if not self.prefill_lines or not total:
            return None
        return self.cached_tokens, total, 100.0 * self.cached_tokens / total
