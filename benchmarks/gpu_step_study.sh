#!/usr/bin/env bash
# benchmarks/gpu_step_study.sh OUT_DIR: GPT-2 XL's training step on one GPU, six cells, each
# against the bare loop (harness_overhead.py) and profiled: bf16 eager, the vocabulary padded to
# a multiple of 64, 2:4 sparse, bf16 compiled, fp8 compiled, micro-batch 16. One file per cell
# in OUT_DIR. Needs accelbench's dependencies importable (torchao for fp8).
set -u
out=${1:?usage: gpu_step_study.sh OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")" || exit 2
export PYTHONPATH="$(cd .. && pwd)${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
cell() {
  local name=$1; shift
  echo "=== $name: $*"
  timeout "${CELL_TIMEOUT_S:-150}" python3 harness_overhead.py "$@" 2>&1 \
    | grep -v -e USDT -e 'profiler_st' | tee "$out/$name.txt"
}
cell bf16-eager --profile
cell bf16-vocab64 --model gpt2-xl:vocab=50304 --profile
cell sparse24 --sparsity 0.5 --steps 4 --profile
cell bf16-compiled --compile --profile
cell fp8-compiled --dtype fp8 --compile --profile
cell bf16-mb16 --micro-batch 16 --steps 6
