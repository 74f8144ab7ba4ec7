#!/usr/bin/env bash
# benchmarks/gpu_step_study.sh OUT_DIR [CELL...]: GPT-2 XL's training step on one GPU, each
# cell against the bare loop (harness_overhead.py), most of them profiled. One file per cell in
# OUT_DIR. Cells (default: all, in this order): bf16-eager, bf16-vocab64, sparse24,
# bf16-compiled, fp8-compiled, bf16-mb16. Needs accelbench's dependencies importable (torchao
# for fp8). bf16-vocab64 asks for the padded vocabulary by name: since the model pads its rows
# itself (ModelConfig.padded_vocab) it is the same model as bf16-eager.
set -u
out=${1:?usage: gpu_step_study.sh OUT_DIR [CELL...]}
shift
mkdir -p "$out"
cd "$(dirname "$0")" || exit 2
export PYTHONPATH="$(cd .. && pwd)${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
args_of() {
  case $1 in
    bf16-eager) echo --profile ;;
    bf16-vocab64) echo --model gpt2-xl:vocab=50304 --profile ;;
    sparse24) echo --sparsity 0.5 --steps 4 --profile ;;
    bf16-compiled) echo --compile --profile ;;
    fp8-compiled) echo --dtype fp8 --compile --profile ;;
    bf16-mb16) echo --micro-batch 16 --steps 6 ;;
    *) echo "unknown cell $1" >&2; return 2 ;;
  esac
}
cells=("$@")
[ ${#cells[@]} -gt 0 ] || cells=(bf16-eager bf16-vocab64 sparse24 bf16-compiled fp8-compiled bf16-mb16)
for name in "${cells[@]}"; do
  args=$(args_of "$name") || exit 2
  echo "=== $name: $args ${EXTRA_ARGS:-}"
  # shellcheck disable=SC2086 # the cell's arguments are words
  timeout "${CELL_TIMEOUT_S:-150}" python3 harness_overhead.py $args ${EXTRA_ARGS:-} 2>&1 \
    | grep -v -e USDT -e 'profiler_st' -e 'acc_events' -e '_warn_once' | tee "$out/$name.txt"
done
