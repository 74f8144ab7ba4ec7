"""The CPU memory estimate against what the cells measured: the quick study's training cells
(its seqlen, gas, sparsity and genslm experiments) run through `accelbench train`/`genslm` on
this CPU, and each cell's estimate (mem_estimate_bytes_per_rank) set beside the memory it added
(mem_added_bytes_per_rank_max: malloc's bytes in use above the cell's start, sampled; RSS
without glibc). Target (issue 28): every error within 15%. The cells run one after another in
one process per command, so only the first to run GEMMs counts MKL's kept packing buffers
(docs/metrics.md); the sampler misses spikes shorter than its interval, so a measured figure is
a lower bound.

    python benchmarks/cpu_memory_estimate.py [--db PATH] [--keep]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from accelbench.store.store import ResultStore

GIB = 2**30
COMMON = ("--device", "cpu", "--dtype", "fp32", "--quiet", "--rerun")
CELLS = (  # the quick profile's training experiments (accelbench/assets/studies/emani2023.toml)
    ("seqlen", ("train", "--model", "gpt2-tiny:positions=1024", "--micro-batch", "4",
                "--seq", "64,128,256,512,1024", "--steps", "3", "--warmup-steps", "1")),
    ("gas", ("train", "--model", "gpt2-tiny", "--seq", "128", "--micro-batch", "1",
             "--gas", "1,8", "--steps", "3", "--warmup-steps", "1")),
    ("sparsity", ("train", "--model", "gpt2-tiny", "--seq", "128", "--micro-batch", "4",
                  "--sparsity", "0,0.9", "--steps", "3", "--warmup-steps", "1")),
    ("genslm", ("genslm", "--model", "genslm-25m", "--seq", "256", "--micro-batch", "1",
                "--steps", "3", "--warmup-steps", "1")),
)


def run(db: Path) -> None:
    """Every experiment's cells into `db` (progress on stderr)."""
    for name, args in CELLS:
        print(f"{name}: accelbench {' '.join(args)}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "accelbench.cli.main", *args, *COMMON,
                        "--db", str(db)], check=True, stdout=subprocess.DEVNULL)


def report(db: Path) -> float:
    """One line a cell: estimate, measured, error; the largest error."""
    worst = 0.0
    print(f"{'cell':<44} {'est GiB':>8} {'meas GiB':>9} {'error':>7}")
    for r in ResultStore(db, write=False).query(kind="train", status="ok"):
        m, s = r.typed, r.spec
        error = m.mem_estimate_bytes_per_rank / m.mem_added_bytes_per_rank_max - 1
        worst = max(worst, abs(error))
        label = (f"{s['model_name']} seq {s['seq_len']} mb {s['micro_batch']} gas {s['gas']} "
                 f"sp {s['sparsity']}")
        print(f"{label:<44} {m.mem_estimate_bytes_per_rank / GIB:>8.3f} "
              f"{m.mem_added_bytes_per_rank_max / GIB:>9.3f} {error:>+7.1%}")
    print(f"largest error {worst:.1%} (target 15%)")
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="Reuse this database (default: a temporary one).")
    parser.add_argument("--keep", action="store_true", help="Only report the --db's cells.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "mem.db"
        if not args.keep:
            run(db)
        report(db)


if __name__ == "__main__":
    main()
