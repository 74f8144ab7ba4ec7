"""Which rank caused a failed launch and its own error, told apart from its peers' echoes."""

from __future__ import annotations

import re
import signal

from accelbench.parallel.procs import signal_name
from accelbench.parallel.watchdog import describe

_LAST_LINE_CHARS = 200


# Signals torchrun's agent sends to the ranks it stops after another failed: not a cause.
_SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# What a rank says when a PEER is gone: the echo of a failure, never its cause.
_PEER_LOSS = re.compile(
    r"connection closed by peer|connection reset|remote (worker|process)|broken pipe|"
    r"timed out|timeout|socket|communicator was aborted|NCCL.*(abort|error)|DistNetworkError|"
    r"DistStoreError|recvBytes|sendBytes|read error|end of file", re.IGNORECASE)


def root_cause(output: str, logs: dict[int, str], errors: dict[int, dict]) -> tuple[int | None,
                                                                                   str]:
    """The rank that caused a failed launch and its own error, in this order: the earliest
    exception a rank raised that is not a lost peer's echo; a rank killed by a signal that
    torchrun did not send (SIGKILL, SIGSEGV); the earliest exception at all; torchrun's root
    cause with its log."""
    own = sorted((e.get("time", 0.0), r) for r, e in errors.items()
                 if not _PEER_LOSS.search(e.get("message", "")))
    if own:
        return own[0][1], _error_text(errors[own[0][1]])
    codes = failure_codes(output)
    killed = [r for r, code in codes.items()
              if code < 0 and -code not in _SHUTDOWN_SIGNALS and r not in errors]
    if killed:
        first = failed_rank_from_output(output)
        rank = first if first in killed else killed[0]
        return rank, _signal_text(-codes[rank], logs.get(rank, ""))
    if errors:
        rank = min(errors, key=lambda r: (errors[r].get("time", 0.0), r))
        return rank, _error_text(errors[rank])
    rank = failed_rank_from_output(output)
    code = codes.get(rank) if rank is not None else None
    found = error_line(logs.get(rank, "") if rank is not None else output)
    if found:
        return rank, found
    how = f"exited with code {code}" if code is not None else "failed"
    return rank, f"{how}, with no error message of its own in its log"


def agent_signal(code: int, output: str) -> int | None:
    """The signal that ended the torchrun agent itself, or None: its exit status (killed by
    it), or torchrun's SignalException ('Process N got signal: 15') when it shut down on one."""
    if code < 0:
        return -code
    match = re.search(r"SignalException: Process \d+ got signal: (\d+)", output)
    return int(match.group(1)) if match else None


# The last line of an exception ('RuntimeError: boom', 'torch.OutOfMemoryError: ...') or of
# Python's fatal error report: what a failed process said of its failure, unlike any other
# line of its log (a profiler's, a warning's, progress).
_ERROR_LINE = re.compile(r"^\s*(Fatal Python error: .*|([A-Za-z_][\w.]*)?"
                         r"(Error|Exception|Interrupt|Exit)(: .*)?)\s*$")


def error_line(log: str) -> str:
    """The last line of `log` that states an error (an exception's, or a fatal error), or ''."""
    found = [line.strip() for line in log.splitlines() if _ERROR_LINE.match(line)]
    return found[-1][-_LAST_LINE_CHARS:] if found else ""


def _signal_text(signum: int, log: str) -> str:
    """'killed by SIGSEGV (signal 11); its last error: ...'. SIGKILL leaves the process no
    last word, so its output is left out: the kernel's out-of-memory killer is the usual
    sender when no person or program was. Only a line stating an error is quoted."""
    text = f"killed by {signal_name(signum)} (signal {signum})"
    if signum == signal.SIGKILL:
        return f"{text}: sent by another process or the kernel's out-of-memory killer"
    last = error_line(log)
    return f"{text}; its last error: {last}" if last else text


def _error_text(error: dict) -> str:
    """'RuntimeError: boom' from a rank's error file."""
    return f"{error.get('type', 'Error')}: {error.get('message', '')}".strip()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][-_LAST_LINE_CHARS:] if lines else ""


def timeout_reason(timeout_s: float, logs: dict[int, str], silent_s: dict[int, float],
                   beats: dict[int, dict] | None = None) -> str:
    """'timed out after N s ...; rank r silent for S s, last line: ...' with the rank that
    stopped making progress (longest without output) first, and its last heartbeat."""
    beats = beats or {}
    parts = [f"timed out after {timeout_s:.0f} s (a rank hung or is too slow); "
             "all ranks and their children killed"]
    for rank in sorted(set(logs) | set(silent_s) | set(beats),
                       key=lambda r: -silent_s.get(r, 0.0)):
        last = _last_line(logs.get(rank, "")) or "(no output)"
        quiet = f" silent for {silent_s[rank]:.1f} s," if rank in silent_s else ""
        beat = f" last heartbeat '{describe(beats[rank])}'," if rank in beats else ""
        parts.append(f"rank {rank}{quiet}{beat} last line: {last}")
    return "; ".join(parts)


def failed_rank_from_output(output: str) -> int | None:
    """The root-cause rank of torchrun's ChildFailedError report ('rank : 1 (local_rank: 1)')."""
    section = output.split("Root Cause", 1)[-1]
    match = re.search(r"rank\s*:\s*(\d+)\s*\(local_rank", section)
    return int(match.group(1)) if match else None


def failure_codes(output: str) -> dict[int, int]:
    """Every failed rank's exit code in torchrun's report (negative: the signal that ended it),
    the root cause and the other failures alike."""
    pairs = re.findall(r"rank\s*:\s*(\d+)\s*\(local_rank[^\n]*\n\s*exitcode\s*:\s*(-?\d+)",
                       output)
    return {int(rank): int(code) for rank, code in pairs}
