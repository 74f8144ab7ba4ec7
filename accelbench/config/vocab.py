"""The words every layer shares, defined once: precisions, recompute kinds, ZeRO stages,
pipeline schedules, float8 recipes and byte units.

Byte units: memory the program measures or estimates is shown in GiB (2^30 bytes, what torch
and the OS report); figures a datasheet gives in GB stay in GB (10^9 bytes). One table never
mixes the two.
"""

from __future__ import annotations

DTYPES = ("fp32", "fp16", "bf16")  # autocast precisions; torch dtypes in bench.dtypes
# What training cells run: the autocast precisions and fp8, which is bf16 autocast with the
# blocks' linear layers' GEMMs in float8 (torchao float8 training; docs/train.md, FP8)
TRAIN_DTYPES = (*DTYPES, "fp8")
FP8_COMPUTE_DTYPE = "bf16"  # an fp8 cell's autocast, activations and MFU peak (NeMo, torchtitan)
FP8_RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")  # torchao's scaling recipes
PEAK_PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")  # what datasheet peaks are given for
RECOMPUTE_KINDS = ("none", "selective", "full")  # activation recomputation (Korthikanti et al.)
LOSS_IMPLS = ("torch", "chunked")  # the loss: whole logits, or chunked head + loss
COMPILE_SCOPES = ("blocks", "model")  # what --compile compiles (bench/train/compile_scope.py)
COMPUTE_WEIGHTS = ("fp32", "bf16")  # the weights a bf16 step computes with (bf16: kept
# between steps, fp32 masters in the optimizer; bench/train/bf16_weights.py)
ZERO_STAGES = (0, 1, 2, 3)  # 0: plain data parallel; 1 optimizer, 2 +grads, 3 +params sharded
PP_SCHEDULES = ("gpipe", "1f1b", "interleaved_1f1b")
COMPILE_BACKENDS = ("inductor", "aot_eager", "eager")  # torch.compile backends `check` may use
GIB = 2**30  # bytes in a GiB: measured and estimated memory
GB = 10**9  # bytes in a GB: datasheet memory and link figures
