"""A torchrun entry point that fails on purpose (no torch import: starts fast).

argv[1]: 'exit' (rank 1 writes an error line, as a failing Python program's last line is, and
exits with 3: the launcher quotes only lines that state an error, never other log output) or
'hang' (rank 1 says so and stops itself with SIGSTOP, which only SIGKILL ends; rank 0 keeps
sleeping). argv[2], optional: a folder where each rank writes '<rank>.pid' so a test can check
that no worker outlives the launch."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

rank = int(os.environ["RANK"])
if len(sys.argv) > 2:
    Path(sys.argv[2], f"{rank}.pid").write_text(str(os.getpid()))
if rank == 1 and sys.argv[1] == "exit":
    print("rank 1 failing on purpose", file=sys.stderr, flush=True)  # not an error line
    print("RuntimeError: simulated crash", file=sys.stderr, flush=True)
    os._exit(3)
if sys.argv[1] == "hang":
    print(f"rank {rank} reached the hang", file=sys.stderr, flush=True)
    if rank == 1:
        os.kill(os.getpid(), signal.SIGSTOP)  # a stopped rank ignores SIGTERM
    while True:
        time.sleep(1)
time.sleep(30)  # rank 0: still running when rank 1 dies
