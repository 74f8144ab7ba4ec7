"""How the accelbench command ends on SIGINT or SIGTERM, within 2 seconds in every phase: one
line, exit 128 + the signal, the interpreter's own teardown skipped (with torch loaded it took
4-6 s on a loaded 2-core machine; docs/bad-input.md). Installed before the commands are
imported (`python -m accelbench` installs it first of all), so a Ctrl-C while importing is
one line too; a command that takes signals over (parallel/procs.py signals_raise) replaces
it while it runs. Imports nothing of accelbench: it is the first thing loaded."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

# Exit codes of a command a signal stopped (128 + SIGINT, 128 + SIGTERM).
INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM)
GRACE_S = 0.5  # a SIGINT nothing acted on this long after is acted on (after_sigint)
SEEN: list[int] = []  # SIGINTs taken by on_sigint (not by a command's own handler)
ENDING: list[bool] = []  # set once the command is ending: after_sigint leaves it be


def is_program() -> bool:
    """Whether this process is the accelbench command itself (its console script or `python
    -m accelbench`, not a launched rank), not a host that called main(): a test's process."""
    module = sys.modules.get("__main__")
    spec = getattr(module, "__spec__", None)
    file = Path(getattr(module, "__file__", "") or "").name
    own = (spec is not None and spec.name == "accelbench.__main__") or file == "accelbench"
    return own and "LOCAL_RANK" not in os.environ


def end_now(code: int) -> None:
    """End an interrupted command now: what it keeps is recorded and its lines are written;
    the atexit handlers run (temporary folders removed), the interpreter's teardown does not."""
    ENDING.append(True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    atexit._run_exitfuncs()
    os._exit(code)


def on_sigint(signum: int, frame: object) -> None:
    """Python's own SIGINT handling, remembered (recent typer turns the KeyboardInterrupt into
    a silent exit code 130), and followed up GRACE_S later (after_sigint)."""
    if not SEEN and is_program():
        timer = threading.Timer(GRACE_S, after_sigint)
        timer.daemon = True
        timer.start()
    SEEN.append(signum)
    raise KeyboardInterrupt


def after_sigint() -> None:
    """A SIGINT the command is not ending on half a second later (a library swallowed the
    KeyboardInterrupt while importing): sent again to the command's own handler where it has
    taken signals over since, else the command ends here, in one line."""
    if ENDING:
        return
    if signal.getsignal(signal.SIGINT) is not on_sigint:
        os.kill(os.getpid(), signal.SIGINT)
        return
    print("interrupted by SIGINT", file=sys.stderr)
    end_now(128 + signal.SIGINT)


def install() -> None:
    """on_sigint as this process's SIGINT handler, where Python's default one is (not where
    SIGINT is ignored, nohup, or outside the main thread)."""
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        signal.signal(signal.SIGINT, on_sigint)
