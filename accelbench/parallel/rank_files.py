"""What a launched rank leaves the launcher in the work folder: its log, its own error, silence."""

from __future__ import annotations

import contextlib
import json
import time
import traceback
from pathlib import Path

ERRORS_DIR = "errors"


TAIL_CHARS = 4000


def rank_silence_s(log_dir: Path) -> dict[int, float]:
    """Seconds since each local rank last wrote to its stdout or stderr log (torchrun's
    <run>/attempt_<n>/<rank>/ folders)."""
    now = time.time()
    latest: dict[int, float] = {}
    for path in log_dir.rglob("std*.log"):
        try:
            rank, mtime = int(path.parent.name), path.stat().st_mtime
        except (ValueError, OSError):
            continue
        latest[rank] = max(latest.get(rank, 0.0), mtime)
    return {rank: max(now - mtime, 0.0) for rank, mtime in latest.items()}


def read_rank_logs(log_dir: Path) -> dict[int, str]:
    """Tail of each local rank's stderr.log under torchrun's log folder (layout varies by
    version: <run>/attempt_<n>/<rank>/stderr.log)."""
    logs: dict[int, str] = {}
    for path in sorted(log_dir.rglob("stderr.log")):
        try:
            rank = int(path.parent.name)
        except ValueError:
            continue
        logs[rank] = path.read_text(errors="replace")[-TAIL_CHARS:]
    return logs


def write_rank_error(work_dir: Path | str, rank: int, err: BaseException) -> None:
    """A launched rank's own exception, for the launcher (<work_dir>/errors/rank-<r>.json):
    its type, first line, time and traceback. Written before the rank exits, since the exit
    status alone cannot say (a Python error often ends the process as SIGABRT at teardown)."""
    folder = Path(work_dir) / ERRORS_DIR
    try:  # not parents: a cell folder recorded and removed (its agent killed) is not made again
        folder.mkdir(exist_ok=True)
    except FileNotFoundError:
        return
    message = str(err).strip().splitlines()[0] if str(err).strip() else ""
    data = {"rank": rank, "type": type(err).__name__, "message": message[:1000],
            "time": time.time(),
            "traceback": "".join(traceback.format_exception(err))[-TAIL_CHARS:]}
    tmp = folder / f".rank-{rank}.json.tmp"
    tmp.write_text(json.dumps(data))
    tmp.replace(folder / f"rank-{rank}.json")


def read_rank_errors(folder: Path) -> dict[int, dict]:
    """The errors ranks wrote with write_rank_error, by rank."""
    errors: dict[int, dict] = {}
    for path in folder.glob("rank-*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            data = json.loads(path.read_text())
            errors[int(data["rank"])] = data
    return errors
