"""A torchrun entry point that fails on purpose (no torch import: starts fast).

argv[1]: 'exit' (rank 1 writes an error and exits with 3) or 'hang' (rank 1 sleeps forever).
"""

from __future__ import annotations

import os
import sys
import time

rank = int(os.environ["RANK"])
if rank == 1 and sys.argv[1] == "exit":
    print("rank 1 failing on purpose: simulated crash", file=sys.stderr, flush=True)
    os._exit(3)
if rank == 1 and sys.argv[1] == "hang":
    while True:
        time.sleep(1)
time.sleep(30 if sys.argv[1] == "exit" else 0)  # rank 0: still running when rank 1 dies
