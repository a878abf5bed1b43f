"""Process-level or request-level: did the server die of a failure, or serve on after it?

An on-call engineer needs the failure that ended the process, not the first of a thousand
request errors the server shrugged off. A failure is request-level when the log shows the
server serving after it (load lines, 2xx access lines, ready after a start-up error) and
nothing says a process died of it; otherwise it is process-level: the engine died, it is the
last substantive event, or it struck before the server was ever ready.
"""

from __future__ import annotations

from triage.core.models import Failure
from triage.core.recache import re_compile
from triage.pipeline.parse import timeline
from triage.pipeline.parse.lines import LogLine

# kinds that are a process's death whatever follows them
ALWAYS_FATAL = frozenset({"nccl", "cuda", "segfault", "cxx", "watchdog", "oom-kill", "sigquit",
                          "engine-fatal", "shard"})
# exceptions that say the engine is gone, even when an HTTP handler is the one that prints them
ENGINE_DEAD = re_compile(r"EngineDead|DeadError|EngineCore(?:Dead|Error)|SchedulerDead|ShardCannotStart")
# what a handler prints when one request failed and the server answers the next
REQUEST_WORDS = re_compile(
    r"Exception in ASGI application|Error in (?:chat completion|completion|request|generate|preprocessing|"
    r"streaming)|serving_chat\.py|serving_completion\.py|serving_engine\.py|\b(?:400|422) Bad Request|"
    r"BadRequestError|Abort request|Error handling request"
)
# the milestones' own ready lines, and the lines other servers print once they accept requests
READY = re_compile(timeline.READY.pattern + r"|Uvicorn running on|Started server process|Server listening on|"
                   r"Connected to the engine|GRPCInferenceService at")
SERVING_GAP = 2  # lines of the failure's own aftermath (a blank, a prompt) that do not count as serving


def _text(f: Failure) -> str:
    return "\n".join(e.text for e in f.raw[:12])


def classify(failures: list[Failure], lines: list[LogLine], last_serving: int) -> None:
    """Set `fatal` and `severity_reason` on every failure."""
    ready_lines = [ln.no for ln in lines if READY.search(ln.message)]
    by_no = {ln.no: ln for ln in lines}
    starts = sorted(f.line for f in failures)
    for f in failures:
        end = max(f.end_line or f.line, f.line)
        for e in f.followed_by:
            end = max(end, e.line)
        # the next failure: when the server served between this one and it, this one did not end it
        later = next((x for x in starts if x > end), None)
        if f.kind in ALWAYS_FATAL:
            f.fatal, f.severity_reason = True, f"a {f.kind} failure ends the process"
            continue
        names = " ".join([f.exception] + [c.exception for c in f.chain])
        if ENGINE_DEAD.search(names) or ENGINE_DEAD.search(f.message):
            f.fatal, f.severity_reason = True, "the engine is dead"
            continue
        if any(_death(e.text) for e in f.followed_by):
            f.fatal, f.severity_reason = True, "a process died right after it"
            continue
        serving_after = last_serving > end + SERVING_GAP or (later is not None and end < last_serving < later)
        ready_after = any(r > end for r in ready_lines)
        # the handler's own line just above the traceback (`ERROR: Exception in ASGI application`)
        above = by_no.get(f.line - 1)
        if serving_after:
            f.fatal, f.severity_reason = False, f"the server kept serving after it (line {last_serving})"
        elif ready_after:
            f.fatal, f.severity_reason = False, "the server became ready after it"
        elif REQUEST_WORDS.search(_text(f)) or (above is not None and REQUEST_WORDS.search(above.message)):
            f.fatal, f.severity_reason = False, "one request's error, printed by the request handler"
        else:
            f.fatal = True
            before_ready = not ready_lines
            f.severity_reason = ("it struck before the server was ready" if before_ready
                                 else "nothing after it shows the server serving")


    _causes_of_death(failures, last_serving)


CAUSE_SPAN = 50  # lines between an error and the engine's death for the error to be its cause


def _causes_of_death(failures: list[Failure], last_serving: int) -> None:
    """An error that the engine's death follows closely, with no serving in between, is what
    killed it, whatever a request handler printed around it: vLLM's EngineCore prints the
    cause, then the API server prints EngineDeadError."""
    ordered = sorted(failures, key=lambda f: f.line)
    for i, f in enumerate(ordered):
        if f.fatal:
            continue
        end = max(f.end_line or f.line, f.line)
        for g in ordered[i + 1 :]:
            if g.line - end > CAUSE_SPAN:
                break
            if g.fatal and g.severity_reason == "the engine is dead" and not (end < last_serving < g.line):
                f.fatal, f.severity_reason = True, f"the engine died right after it (line {g.line})"
                break


_DEATH = re_compile(r"Killed|sigquit|SIGQUIT|died|dead|exit(?:ed)? (?:with )?(?:code|status) [1-9-]|"
                       r"core dumped|Aborted|terminat")


def _death(text: str) -> bool:
    return bool(_DEATH.search(text))
