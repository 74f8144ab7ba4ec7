"""Run under torchrun: one dp=2 training cell, each rank metered by a counter replaying
recorded readings (this machine has no energy counter), rank 0's record written as JSON.

Usage: torchrun --nproc-per-node 2 tests/dist/energy_worker.py OUT.json device|host
'device': each rank its own device, rank r drawing 10 x (r + 1) W; 'host': one host-wide
counter at 30 W that every rank reads (as RAPL), which the cell must count once.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))

from energy_replay import ReplayCounter  # noqa: E402

from accelbench.bench.gemm_peak import SweepPeak  # noqa: E402
from accelbench.bench.train.spec import TrainSpec  # noqa: E402
from accelbench.bench.train.sweep import run_train_sweep  # noqa: E402
from accelbench.config.presets import get_preset  # noqa: E402
from accelbench.hardware.energy import set_source_factory  # noqa: E402

TINY = get_preset("gpt2-tiny").with_changes(n_layer=2, vocab_size=1024, n_positions=64)


def main() -> None:
    out, mode = Path(sys.argv[1]), sys.argv[2]
    rank = int(os.environ["RANK"])
    watts = 30.0 if mode == "host" else 10.0 * (rank + 1)
    start = time.perf_counter()
    readings = [(start, 0.0), (start + 3600, watts * 3600)]
    set_source_factory(lambda device: ReplayCounter(readings, host_wide=mode == "host"))
    spec = TrainSpec(model=TINY, seq_lens=(32,), micro_batches=(2,), dtypes=("fp32",),
                     steps=4, warmup_steps=1, device="cpu", layout="dp=2",
                     peaks=(SweepPeak("fp32", 1e11, "fp32", "given"),))  # none measured: ~6 s
    outcomes = run_train_sweep(spec, lambda o: None)
    if rank == 0:
        o = outcomes[0]
        out.write_text(json.dumps({"status": o.status, "reason": o.reason,
                                   "metrics": o.metrics}))


if __name__ == "__main__":
    main()
