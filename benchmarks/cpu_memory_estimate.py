"""The CPU memory estimate against what the cells measured, as a table.

Three sets. `quick`: the quick study's one-process training cells (its seqlen, gas, sparsity and
genslm experiments) through `accelbench train`/`genslm`, fp32 (issue 28's target: 15%).
`layouts`: gpt2 (124M) at micro-batch 1, sequence 64, 3 steps (1 warm-up), one trial, on every
layout accelbench's runtime builds (one process, DDP, ZeRO 1/2/3, tp, tp + sp, pp, cp and, on a
6-layer gpt2 with 4 experts, ep) in fp32 and bf16, bf16 again with the lean settings off
(`--runtime ddp_views=off,zero_views=off,fsdp_mp=off`: the before
of docs/parallel.md's before/after), and last fp16 and fp8 on one process and dp=2 (fp16 also
ZeRO-3), which a CPU runs slowly. `lowp`: fp16 and fp8 on the layouts `layouts` leaves
them out of, where the runtime runs them (both are refused under tp and pp, fp8 with experts):
ZeRO 1/2, cp and ep in fp16; ZeRO 1/2/3 and cp in fp8.
Each cell's estimate (mem_estimate_bytes_per_rank, with the widths and moment it names) is set
beside the memory the worst rank added
(mem_added_bytes_per_rank_max: malloc's bytes in use above the cell's start, sampled every
2 ms, so a lower bound). Issue 37's target: every layout within 10%.

    python benchmarks/cpu_memory_estimate.py [--set quick|layouts|lowp] [--db PATH] [--keep]
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


GPT2 = ("train", "--model", "gpt2", "--seq", "64", "--micro-batch", "1", "--steps", "3",
        "--warmup-steps", "1", "--trials", "1", "--device", "cpu", "--quiet")  # a --db
# given again resumes: its finished cells are skipped
MOE = "gpt2:n_layer=6,experts=4"  # ep needs experts: gpt2's width, 6 layers, 4 experts a layer
LEGACY = ("--runtime", "ddp_views=off,zero_views=off,fsdp_mp=off")
LAYOUTS = (  # (name, layout, dtypes, extra arguments): fp32 and bf16 everywhere first, then
    # bf16 with the lean settings off, then fp16 and fp8 where the CPU runs them (slowly)
    ("one process", "dp=1", "fp32,bf16", ()),
    ("ddp", "dp=2", "fp32,bf16", ()),
    ("zero1", "dp=2,zero=1", "fp32,bf16", ()),
    ("zero2", "dp=2,zero=2", "fp32,bf16", ()),
    ("zero3", "dp=2,zero=3", "fp32,bf16", ()),
    ("tp", "tp=2", "fp32,bf16", ()),
    ("tp+sp", "tp=2,sp=1", "fp32,bf16", ()),
    ("pp 1f1b", "pp=2", "fp32,bf16", ("--gas", "2")),
    ("cp", "cp=2", "fp32,bf16", ()),
    ("ep", "dp=2,ep=2", "fp32,bf16", ("--model", MOE)),
    *((f"{name} lean off", layout, "bf16", LEGACY) for name, layout in
      (("ddp", "dp=2"), ("zero1", "dp=2,zero=1"), ("zero2", "dp=2,zero=2"),
       ("zero3", "dp=2,zero=3"))),
    ("one process", "dp=1", "fp16,fp8", ()),
    ("ddp", "dp=2", "fp16,fp8", ()),
    ("zero3", "dp=2,zero=3", "fp16", ()),
)
LOWP = (  # `--set lowp`: fp16 (with its loss scaler) and fp8 on the layouts LAYOUTS leaves out,
    # where the runtime runs them: both are refused under tp and pp (the scaler's overflow check
    # and the float8 layers are built for data-parallel layouts), fp8 with experts
    ("zero1", "dp=2,zero=1", "fp16,fp8", ()),
    ("zero2", "dp=2,zero=2", "fp16,fp8", ()),
    ("zero3", "dp=2,zero=3", "fp8", ()),
    ("cp", "cp=2", "fp16,fp8", ()),
    ("ep", "dp=2,ep=2", "fp16", ("--model", MOE)),
)


def run_command(args: tuple[str, ...], db: Path) -> None:
    """One accelbench command into `db`; a failed one is said on stderr, the rest go on."""
    print(f"accelbench {' '.join(args)}", file=sys.stderr)
    done = subprocess.run([sys.executable, "-m", "accelbench.cli.main", *args, "--db", str(db)],
                          stdout=subprocess.DEVNULL, check=False)
    if done.returncode:
        print(f"  exit {done.returncode}", file=sys.stderr)


def run(db: Path, which: str) -> None:
    """The set's cells into `db` (progress on stderr)."""
    if which == "quick":
        for _, args in CELLS:
            run_command((*args, *COMMON), db)
        return
    for _, layout, dtypes, extra in LAYOUTS if which == "layouts" else LOWP:
        nproc = 1 if layout == "dp=1" else 2
        where = ("--nproc", "1") if nproc == 1 else ("--nproc", "2", "--layout", layout)
        run_command((*GPT2, *where, "--dtype", dtypes, *extra), db)


def _label(spec: dict) -> str:
    """A cell's layout, settings and shape in a few words."""
    layout = spec.get("layout", {})
    parts = [f"{k}={v}" for k, v in layout.items()
             if k in ("dp", "tp", "pp", "cp", "ep") and v != 1 or k == "zero" and v]
    parts += ["sp"] * bool(layout.get("sp"))
    settings = spec.get("runtime_settings", {})
    off = [k for k, v in settings.items() if v is False]
    return (f"{spec['model_name']} {','.join(parts) or 'one process'} {spec['dtype']} "
            f"seq {spec['seq_len']} mb {spec['micro_batch']} gas {spec['gas']}"
            + (f" sparsity {spec['sparsity']}" if spec.get("sparsity") else "")
            + (f" [{' '.join(off)} off]" if off else ""))


def report(db: Path) -> float:
    """One line a cell: estimate, measured, error, the estimate's widths and moment; then the
    cells that did not run, with why; the largest error."""
    worst = 0.0
    print(f"{'cell':<58} {'est GiB':>8} {'meas GiB':>9} {'error':>7}  widths, moment")
    # the last record of each cell (a cell run again, or resumed after an error, replaces it)
    latest = {r.spec.get("fingerprint", r.uid): r
              for r in ResultStore(db, write=False).query(kind="train")}
    records = list(latest.values())
    for r in records:
        m = r.typed
        if r.status != "ok" or not m.mem_added_bytes_per_rank_max:
            continue
        error = m.mem_estimate_bytes_per_rank / m.mem_added_bytes_per_rank_max - 1
        worst = max(worst, abs(error))
        print(f"{_label(r.spec):<58} {m.mem_estimate_bytes_per_rank / GIB:>8.3f} "
              f"{m.mem_added_bytes_per_rank_max / GIB:>9.3f} {error:>+7.1%}  "
              f"{m.mem_estimate_widths or 'published'}, {m.mem_estimate_moment or 'sum'}")
    for r in records:
        if r.status != "ok":
            print(f"{_label(r.spec):<58} {r.status}: {r.reason}")
    print(f"largest error {worst:.1%} (targets: 15% quick, 10% layouts)")
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=("quick", "layouts", "lowp"), default="quick",
                        help="The quick study's cells, gpt2 on every layout in fp32 and bf16 "
                             "(fp16/fp8 on some), or fp16 and fp8 on the other layouts.")
    parser.add_argument("--db", type=Path, help="Reuse this database (default: a temporary one).")
    parser.add_argument("--keep", action="store_true", help="Only report the --db's cells.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "mem.db"
        if not args.keep:
            run(db, args.set)
        report(db)


if __name__ == "__main__":
    main()
