"""The words every layer shares, defined once: precisions, recompute kinds, ZeRO stages,
pipeline schedules and byte units.

Byte units: memory the program measures or estimates is shown in GiB (2^30 bytes, what torch
and the OS report); figures a datasheet gives in GB stay in GB (10^9 bytes). One table never
mixes the two.
"""

from __future__ import annotations

DTYPES = ("fp32", "fp16", "bf16")  # training precisions; torch dtypes in bench.dtypes
PEAK_PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")  # what datasheet peaks are given for
RECOMPUTE_KINDS = ("none", "selective", "full")  # activation recomputation (Korthikanti et al.)
ZERO_STAGES = (0, 1, 2, 3)  # 0: plain data parallel; 1 optimizer, 2 +grads, 3 +params sharded
PP_SCHEDULES = ("gpipe", "1f1b", "interleaved_1f1b")
GIB = 2**30  # bytes in a GiB: measured and estimated memory
GB = 10**9  # bytes in a GB: datasheet memory and link figures
