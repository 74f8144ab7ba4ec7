"""Bad input to every command is refused first: one line `error: <field>: <problem> (allowed:
...)` on stderr, exit code 2, nothing on stdout, no results database and no other file made,
before any banner, model or measurement.

CASES is also the source of docs/bad-input.md: scripts/bad_input_table.py runs each case and
writes the table, and test_doc_is_current checks the page says what the script would write.
Every case must be refused before a model is built (run_case makes building one, opening the
results store or preparing shards fail the case), so the whole list runs in seconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from accelbench.cli.main import main

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "bad-input.md"


@dataclass(frozen=True)
class Case:
    """A command line ('{dir}' stands for the folder of INPUTS) and the start of its one line."""

    argv: tuple[str, ...]
    expected: str


def case(command: str, expected: str) -> Case:
    """A Case from a command line written as the shell would split it on spaces."""
    return Case(tuple(command.split(" ")), expected)


# Cases of several ranks name --device cpu: on an accelerator the ranks are checked against its
# device count first, and the page must read the same on every machine.

# The files and folders under {dir} that the cases name, and what each one is.
INPUTS = {
    "empty.fa": "an empty file",
    "headers.fa": "a FASTA file of two headers and no sequence",
    "binary.txt": "1 KiB of binary bytes (NUL included)",
    "english.txt": "one line of English",
    "afile": "a plain file where a folder is expected",
    "bert/": "a folder whose config.json has model_type 'bert'",
    "gqa3.json": "a Llama config.json: 6 query heads on 3 key/value heads",
    "cpu-profile.json": "a machine profile record measured on a CPU (no curves)",
    "bad-ids/": "a shard folder whose index and sha256 are right but whose token ids (60000) "
                "exceed GPT-2's 50257",
}

CASES = [
    # train (genslm and scale share these options and checks)
    case("train --lr nan", "error: lr: must be a finite number, got nan"),
    case("train --lr inf", "error: lr: must be a finite number, got inf"),
    case("train --time-budget inf", "error: time-budget: must be a finite number, got inf"),
    case("train --grad-clip nan", "error: grad-clip: must be a finite number, got nan"),
    case("train --weight-decay inf", "error: weight-decay: must be a finite number, got inf"),
    case("train --cell-timeout 0", "error: cell-timeout: must be a positive number, got 0.0"),
    case("train --cell-timeout -5", "error: cell-timeout: must be a positive number, got -5.0"),
    case("train --steps 0", "error: steps: must be a positive number, got 0"),
    case("train --trials 0", "error: trials: must be a whole number >= 1 or auto, got '0'"),
    case("train --trials nan", "error: trials: must be a whole number >= 1 or auto, got 'nan'"),
    case("scale --trials 0", "error: trials: must be a whole number >= 1 or auto, got '0'"),
    case("study run emani2023 --retry-disturbed -1 --db {dir}/s.db",
         "error: retry-disturbed: must be a whole number from 0 to 10, got -1"),
    case("study run emani2023 --retry-disturbed 11 --db {dir}/s.db",
         "error: retry-disturbed: must be a whole number from 0 to 10, got 11"),
    # every count has a stated bound (config/units.py COUNT_BOUNDS, config/trial_count.py
    # MAX_TRIALS)
    case("train --trials 1001", "error: trials: 1,001 is over the bound of 1,000"),
    case("train --trials 1000000000", "error: trials: 1,000,000,000 is over the bound of 1,000"),
    case("train --steps 100001", "error: steps: must be a whole number from 1 to 100,000, got "
         "100001"),
    case("train --gas 1000000000", "error: gas: 1,000,000,000 is over the bound of 16,384"),
    case("train --micro-batch 1,65537", "error: micro-batch: 65,537 is over the bound of "
         "65,536"),
    case("scale --devices 1,100000", "error: devices: 100,000 is over the bound of 65,536"),
    case("block --repeats 100001", "error: repeats: must be a whole number from 1 to 100,000, "
         "got 100001"),
    case("block --warmup 100001", "error: warmup: must be a whole number from 0 to 100,000, "
         "got 100001"),
    case("block --batch 70000", "error: batch: 70,000 is over the bound of 65,536"),
    case("block --trials 5000", "error: trials: 5,000 is over the bound of 1,000"),
    case("noise --trials 1001", "error: trials: 1,001 is over the bound of 1,000"),
    case("train --disturbance-threshold 0", "error: disturbance-threshold: must be a fraction "
         "in (0, 1], got 0.0"),
    case("train --disturbance-threshold nan", "error: disturbance-threshold: must be a fraction "
         "in (0, 1], got nan"),
    case("train --warmup-steps 20", "error: warmup-steps: must be in [0, steps), got 20"),
    case("train --seq 2048", "error: seq: 2048 is longer than the model's 1024 positions"),
    case("train --micro-batch 2,,4", "error: micro-batch: empty item in '2,,4'"),
    case("train --seq 64,64", "error: seq: 64 given twice"),
    case("train --dtype fp32,fp32", "error: dtype: fp32 given twice"),
    case("train --dtype fp64", "error: dtype: unknown value 'fp64'"),
    case("train --dtype fp8 --fp8-recipe blockwise", "error: fp8-recipe: unknown value "
         "'blockwise'"),
    case("train --fp8-recipe rowwise", "error: fp8-recipe: 'rowwise' given without fp8 in "
         "--dtype"),
    case("train --dtype fp8 --sparsity 0.5", "error: dtype: fp8 with --sparsity: masked "
         "weights in float8 GEMMs are not built"),
    case("train --model gpt2 --nproc 2 --device cpu --layout tp=2 --dtype fp8", "error: dtype: "
         "fp8 on layout dp=1,tp=2,pp=1,zero=0,sp=off: float8 layers are built for data-parallel "
         "layouts only"),
    # names are case-sensitive and lower-case everywhere (config/units.py): never folded
    case("train --dtype FP32", "error: dtype: unknown value 'FP32' (allowed: fp32, fp16, bf16, "
         "fp8)"),
    case("train --recompute Full", "error: recompute: unknown value 'Full' (allowed: none, "
         "selective, full)"),
    case("train --device CPU", "error: device: unknown device 'CPU' (allowed: auto, cpu,"),
    case("train --model GPT2", "error: model: unknown preset 'GPT2' (allowed: "),
    case("train --recompute some", "error: recompute: unknown value 'some'"),
    case("train --seed -1", "error: seed: must be in [0, 2**63 - 1], got -1"),
    case("train --mem-limit 1e999", "error: mem-limit: size '1e999' is not a finite number"),
    case("train --mem-limit 0.5B", "error: mem-limit: must be at least one byte"),
    case("train --device tpu", "error: device: unknown device 'tpu'"),
    case("train --model gpt2:heads=7", "error: model.n_head: 7 heads do not divide"),
    case("train --model moe-tiny:top_k=9", "error: model.moe_top_k: 9 experts per token with 8 "
         "experts"),
    case("train --model moe-tiny:experts=0,top_k=5", "error: model.n_experts: experts must be "
         "at least 1, got 0"),
    case("train --model gpt2:top_k=2", "error: model.moe_top_k: moe_top_k given to gpt2, a "
         "dense model"),
    case("train --model moe-tiny:moe_first_dense=2", "error: model.moe_first_dense: no "
         "mixture-of-experts layer is left among 2 layers"),
    case("train --model llama3-8b:layers=2,hidden=256,heads=4,kv_heads=3", "error: "
         "model.n_kv_head: 3 key/value heads do not divide 4 heads"),
    case("train --model llama3-8b:kv_heads=0", "error: model.n_kv_head: kv_heads must be at "
         "least 1, got 0"),
    case("train --model moe-tiny:moe_gate=relu", "error: model.moe_gate: unknown value 'relu'"),
    case("train --model moe-tiny:capacity_factor=-1", "error: model.capacity_factor: must be 0 "
         "or a positive number, got -1.0"),
    case("train --model moe-tiny --sparsity 0.5", "error: sparsity: weight sparsity of a "
         "mixture of experts is not built"),
    case("train --model moe-tiny --dtype fp8", "error: dtype: fp8 with a mixture of experts"),
    case("train --model hf:{dir}/bert", "error: {dir}/bert: model_type: 'bert' is not supported "
         "(allowed: gpt2, gpt_neox, llama, mistral, qwen2, mixtral, qwen2_moe)"),
    case("train --model hf-config:{dir}/missing.json", "error: model: no config file at "
         "'{dir}/missing.json'"),
    case("train --data {dir}/missing", "error: data: no such folder: {dir}/missing"),
    case("train --data {dir}/afile", "error: data: {dir}/afile is a file, not a shard folder"),
    case("train --data {dir}/bad-ids", "error: data: shard {dir}/bad-ids/shard_00000.bin "
         "holds token id 60000"),
    case("train --nproc 0", "error: nproc: must be a positive number, got 0"),
    case("train --nproc 1 --layout tp=2", "error: layout: tp*pp*cp = 2 does not divide the 1 "
         "devices"),  # an --nproc that contradicts the layout (without one: the layout's ranks)
    case("train --nproc 2 --device cpu --layout tp=3", "error: layout: tp*pp*cp = 3 does not "
         "divide the 2 devices"),
    case("train --nproc 2 --device cpu --layout dp=2,zero=9", "error: layout.zero: unknown "
         "ZeRO stage 9"),
    case("train --model hf-config:{dir}/gqa3.json --nproc 2 --device cpu --layout tp=2",
         "error: layout.tp: tp=2 neither divides the 3 key/value heads nor is a multiple of "
         "them"),
    case("train --model moe-tiny --nproc 3 --device cpu --layout ep=3", "error: layout.ep: "
         "ep=3 does not divide the 8 experts"),
    case("train --nproc 2 --device cpu --layout ep=2", "error: layout.ep: ep=2: expert "
         "parallelism splits mixture-of-experts layers, and model gpt2-xl has none"),
    case("train --nproc 2 --device cpu --layout cp=2 --seq 30", "error: layout.cp: cp=2 splits "
         "each sequence into 2 x cp = 4 load-balanced chunks, which do not divide sequence 30"),
    case("train --nproc 2 --device cpu --layout cp=3", "error: layout: tp*pp*cp = 3 does not "
         "divide the 2 devices"),
    case("train --model llama-tiny --seq 64 --nproc 8 --device cpu --layout tp=4,cp=2",
         "error: layout.cp: cp=2 with ep=1, tp=4 on 2 key/value heads: accelbench's "
         "runtime builds context parallelism with dp, ZeRO, pp and tp (+sp)"),
    case("train --model moe-tiny --nproc 2 --device cpu --layout cp=2", "error: layout.cp: cp=2 "
         "with model moe-tiny's mixture-of-experts layers"),
    case("train --nproc 2 --device cpu --max-micro-batch", "error: max-micro-batch: the "
         "largest-micro-batch search runs on one process only"),
    case("train --json --output {dir}/missing/out.json", "error: output: '{dir}/missing/"
         "out.json': folder '{dir}/missing' does not exist"),
    case("train --output {dir}/out.json", "error: output: writes the --json or --csv text"),
    case("train --json --csv", "error: csv: give --json or --csv, not both"),
    case("train --steps abc", "error: Invalid value for '--steps': Input should be a valid "
         "integer, unable to parse string as an integer (allowed: a whole number, default 20;"),
    case("train --lr fast", "error: Invalid value for '--lr'"),
    case("plan --nodes 1.5", "error: Invalid value for '--nodes'"),
    case("train --stepz 3", "error: No such option: --stepz"),
    case("genslm --frame 3", "error: frame: unknown reading frame 3"),
    case("genslm --seq 64,128 --longest-seq", "error: seq: the longest-sequence search starts "
         "from one length, got 2"),
    case("scale --devices 1,1", "error: devices: 1 given twice"),
    case("scale --devices 0", "error: devices: must be positive, got 0"),
    case("scale --mode sideways", "error: mode: unknown value 'sideways'"),
    case("scale --zero 5", "error: layout.zero: unknown ZeRO stage 5"),
    case("scale --seq 512,1024", "error: scale: the scaling study takes one cell"),
    case("scale --devices 3 --device cpu --mode strong", "error: devices: strong scaling splits "
         "micro-batch 8 over 3 devices"),
    # block
    case("block --seq 100000", "error: seq: 100000 is longer than the model's 1024 positions"),
    case("block --batch 1,,2", "error: batch: empty item in '1,,2'"),
    case("block --batch 8,8", "error: batch: 8 given twice"),
    case("block --dtype fp32,fp32", "error: dtype: fp32 given twice"),
    case("block --dtype BF16", "error: dtype: unknown value 'BF16' (allowed: fp32, fp16, "
         "bf16)"),
    case("block --repeats 0", "error: repeats: must be a positive number, got 0"),
    case("block --trials 0", "error: trials: must be a whole number >= 1 or auto, got '0'"),
    case("block --trials nan", "error: trials: must be a whole number >= 1 or auto, got 'nan'"),
    case("block --disturbance-threshold 1.5", "error: disturbance-threshold: must be a fraction "
         "in (0, 1], got 1.5"),
    case("block --warmup -1", "error: warmup: must be 0 or more, got -1"),
    case("block --csv --output {dir}", "error: output: '{dir}' is a directory"),
    # noise
    case("noise --trials 3", "error: trials: an A/A check needs at least 5 trials a condition "
         "for an interval, got 3"),
    case("noise --trials 0", "error: trials: an A/A check needs at least 5 trials a condition "
         "for an interval, got 0"),
    case("noise --seq 0", "error: seq: must be positive, got 0"),
    case("noise --dtype fp64", "error: dtype: unknown value 'fp64'"),
    # calibrate
    case("calibrate --ops gemm,fft", "error: ops: unknown value 'fft'"),
    case("calibrate --gemm-passes forward,dw", "error: gemm-passes: unknown value 'dw'"),
    case("calibrate --ops GEMM", "error: ops: unknown value 'GEMM' (allowed: gemm,"),
    case("calibrate --tokens 0", "error: tokens: must be positive, got 0"),
    case("calibrate --memory-sizes 12XB", "error: memory-sizes: cannot read size '12XB'"),
    case("calibrate --message-sizes 4KiB,4096", "error: message-sizes: a size given twice"),
    case("calibrate --collectives broadcast", "error: collectives: unknown value 'broadcast'"),
    case("calibrate --nproc 1", "error: nproc: collectives need 2 processes or more, got 1"),
    case("calibrate --threads -1", "error: threads: must be 0 or more, got -1"),
    case("calibrate --threads 5000", "error: threads: must be a whole number from 0 to 1,024, "
         "got 5000"),
    case("calibrate --repeats 1000000", "error: repeats: must be a whole number from 1 to "
         "100,000, got 1000000"),
    case("calibrate --tokens 128,2000000", "error: tokens: 2,000,000 is over the bound of "
         "1,048,576"),
    # plan
    case("plan --seq 4096", "error: seq: 4096 is longer than gpt3-175b's 2048 positions"),
    case("plan --train-tokens nan", "error: train-tokens: must be a finite number, got nan"),
    case("plan --intra-bw inf", "error: intra-bw: must be a finite number, got inf"),
    case("plan --inter-latency-us -3", "error: inter-latency-us: must not be negative"),
    case("plan --efficiency 1.5", "error: efficiency: must be in (0, 1], got 1.5"),
    case("plan --nodes 128 --layout dp=3,tp=7", "error: layout: --layout dp=3,tp=7 never "
         "divides: tp*pp*cp = 7 does not divide the 1024 devices"),
    case("plan --layout pp=4,pp_first=500", "error: layout.pp: --layout pp=4,pp_first=500 never "
         "divides"),
    case("plan --nodes 10000000000", "error: nodes: 10,000,000,000 nodes x 8 = 80,000,000,000 "
         "devices, more than any layout of gpt3-175b occupies"),
    case("plan --layout dp=1,dp=2", "error: layout.dp: given twice in 'dp=1,dp=2'"),
    case("plan --device tpu-v9", "error: device: unknown device 'tpu-v9'"),
    case("plan --device H100-SXM", "error: device: unknown device 'H100-SXM' (allowed: "
         "a100-40gb,"),
    case("plan --dtype BF16", "error: dtype: unknown value 'BF16' (allowed: fp32, tf32, fp16, "
         "bf16, fp8)"),
    case("plan --layout tp=8,recompute=Full", "error: layout.recompute: unknown value 'Full'"),
    case("plan --layout tp=8,sp=ON", "error: layout.sp: must be a boolean, got 'ON'"),
    case("plan --device h100-sxm:memory=96",
         "error: device: bad variant item 'memory=96' of 'h100-sxm'"),
    case("plan --device h100-sxm:peak_scale=0",
         "error: device: peak_scale must be a positive number, got '0'"),
    case("plan --dtype fp8", "error: dtype: a100-80gb has no fp8 peak in the device table"),
    case("plan --layout ep=8", "error: layout.ep: ep=8: expert parallelism splits "
         "mixture-of-experts layers, and model gpt3-175b has none"),
    case("plan --model mixtral-8x7b --layout ep=3", "error: layout.ep: ep=3 does not divide "
         "the 8 experts"),
    case("plan --model mixtral-8x7b --layout dp=4,ep=8", "error: layout.ep: ep=8 does not "
         "divide dp=4"),
    case("plan --model llama3-8b --device h100-sxm --seq 8200 --global-batch 8 --layout "
         "dp=1,tp=1,pp=1,vp=1,cp=8,mb=1,zero=0,recompute=none",
         "error: layout.cp: cp=8 splits each sequence into 2 x cp = 16 load-balanced chunks"),
    case("plan --sparsity 1", "error: sparsity: must be in [0, 1), got 1.0"),
    case("plan --sparsity 0.6 --sparsity-pattern 2:4", "error: sparsity: 2:4 keeps exactly "
         "half the weights, got 0.6"),
    case("plan --validate --seq 4096", "error: validate: --validate does not use --seq"),
    case("plan --overlap async", "error: overlap: unknown value 'async'"),
    case("plan --memory-headroom 1.5", "error: memory-headroom: must be in (0, 1], got 1.5"),
    case("plan --model gpt2 --global-batch 8 --seq 512 --profile {dir}/cpu-profile.json",
         "error: profile: measured on cpu, cannot time a100-80gb (a gpu)"),
    case("plan --profile {dir}/afile", "error: profile: cannot read"),
    case("plan --profile latest --db {dir}/results.db", "error: profile: no results store at"),
    case("plan --profile {dir}/afile --efficiency 0.5", "error: efficiency: --efficiency "
         "replaces"),
    case("plan --db {dir}/results.db", "error: db: a plan reads no results; --db is for "
         "--validate"),
    # data
    case("data prepare --genome {dir}/empty.fa --out {dir}/shards", "error: genome: "
         "{dir}/empty.fa holds no sequence"),
    case("data prepare --genome {dir}/headers.fa --out {dir}/shards", "error: genome: "
         "{dir}/headers.fa holds no sequence"),
    case("data prepare --genome {dir}/binary.txt --out {dir}/shards", "error: genome: "
         "{dir}/binary.txt: sequence data before the first '>' header"),
    case("data prepare --source {dir}/binary.txt --out {dir}/shards", "error: source: "
         "{dir}/binary.txt holds NUL bytes"),
    case("data prepare --source {dir}/english.txt --tokenizer codon --out {dir}/shards",
         "error: tokenizer: the codon tokenizer reads nucleotides"),
    case("data prepare --source {dir}/english.txt --shard-tokens 0 --out {dir}/shards",
         "error: shard-tokens: must be a positive number, got 0"),
    case("data prepare --source {dir}/english.txt --out {dir}/afile", "error: out: {dir}/afile "
         "is a file, not a folder"),
    case("data prepare --source {dir}/english.txt --out {dir}/afile/shards", "error: out: "
         "{dir}/afile/shards cannot be made: {dir}/afile is a file"),
    case("data prepare --source {dir}/missing.txt --out {dir}/shards", "error: source: "
         "'{dir}/missing.txt' is neither a keyword nor an existing path"),
    case("data prepare --genome default --frame 5", "error: frame: unknown reading frame 5"),
    case("data info {dir}/bad-ids", "error: data: shard {dir}/bad-ids/shard_00000.bin holds "
         "token id 60000"),
    case("data info {dir}/afile", "error: data: {dir}/afile is a file, not a shard folder"),
    # report (its --db checks: test_report.py and docs/results.md)
    case("report --out {dir}/afile", "error: out: {dir}/afile is a file, not a folder"),
    case("report --out {dir}/afile/report", "error: out: {dir}/afile/report cannot be made: "
         "{dir}/afile is a file"),
    # sbatch, hw
    case("sbatch --nodes 0 -- train", "error: nodes: must be a positive number, got 0"),
    case("sbatch --nodes 1 --port 70000 -- train", "error: port: must be a TCP port"),
    case("sbatch --nodes 1 --time 1h -- train", "error: time: cannot read Slurm time '1h'"),
    case("sbatch --nodes 1 -- plan", "error: command: 'plan' does not run as a process group"),
    case("sbatch --nodes 2 -- train --layout dp=4", "error: layout: dp*tp*pp*cp = 4*1*1*1 = 4, but "
         "the world has 16 devices"),
    case("sbatch --nodes 2 --gpus-per-node 0 -- train --nproc 3", "error: nproc: 3 ranks do "
         "not split evenly over --nodes 2"),
    case("sbatch --nodes 4 --gpus-per-node 0 -- train --nproc 2", "error: nproc: 2 ranks do "
         "not split evenly over --nodes 4"),
    case("sbatch --nodes 2 --gpus-per-node 4 -- train --nproc 4", "error: nproc: 4 ranks, but "
         "--nodes 2 x 4 ranks a node = 8"),
    case("sbatch --nodes 2 --gpus-per-node 8 --nproc-per-node 4 -- train", "error: "
         "nproc-per-node: 4 ranks on 8 GPUs a node"),
    case("sbatch --nodes 1 --gpus-per-node -1 -- train", "error: gpus-per-node: must be 0 or "
         "more, got -1"),
    case("sbatch --nodes 1 --cpus-per-task 0 -- train", "error: cpus-per-task: must be a "
         "positive number, got 0"),
    case("sbatch --nodes 2 --gpus-per-node 0 -- train --layout cp=4", "error: layout: "
         "tp*pp*cp = 4 does not divide the 2 devices"),
    case("sbatch --nodes 1 --gpus-per-node 4 -- train --layout cp=4 --seq 36", "error: "
         "layout.cp: cp=4 splits each sequence into 2 x cp = 8 load-balanced chunks"),
    # sbatch: nothing hostile reaches the script (tests/unit/test_sbatch_hostile.py runs it)
    Case(("sbatch", "--nodes", "1", "--log-dir", "logs\ntouch x\n#", "--", "train"),
         "error: log-dir: 'logs\\ntouch x\\n#' holds the control character '\\n'"),
    case("sbatch --nodes 1 --log-dir logs%j -- train", "error: log-dir: 'logs%j' holds '%' or "
         "'\\', which Slurm reads in file names"),
    case("sbatch --nodes 1 --job-name a;touch -- train", "error: job-name: 'a;touch' is not a "
         "Slurm name"),
    case("sbatch --nodes 1 --partition gpu,$(id) -- train", "error: partition: 'gpu,$(id)' is "
         "not a Slurm name"),
    Case(("sbatch", "--nodes", "1", "--", "train", "--data", "x\ntouch y"), "error: command: "
         "'x\\ntouch y' holds the control character '\\n'"),
    case("sbatch --nodes 1 -- train --model no-such-model", "error: model: unknown preset "
         "'no-such-model'"),
    case("sbatch --nodes 1 -- train --model gpt2 --seq 2048", "error: seq: 2048 is longer than "
         "the model's 1024 positions"),
    case("sbatch --nodes 1 -- genslm --model gpt2 --dtype fp64", "error: dtype: unknown value "
         "'fp64'"),
    case("sbatch --nodes 1000000 -- train", "error: nodes: must be a whole number from 1 to "
         "200,000, got 1000000"),
    case("sbatch --nodes 1 --cpus-per-task 5000 -- train", "error: cpus-per-task: must be a "
         "whole number from 1 to 1,024, got 5000"),
    case("sbatch --nodes 1 -- train --db {dir}/afile/r.db", "error: db: {dir}/afile/r.db cannot "
         "be written: {dir}/afile is not a folder"),
    case("hw --device tpu", "error: device: unknown device 'tpu'"),
    case("publish --out {dir}/afile/bundle.json", "error: out: '{dir}/afile/bundle.json': "
         "folder '{dir}/afile' does not exist"),
    case("site {dir}/english.txt --out {dir}/site", "error: BUNDLE: 'english.txt' is not JSON"),
    case("site {dir}/cpu-profile.json --out {dir}/afile", "error: out: {dir}/afile is a file, "
         "not a folder"),
    case("check --device tpu", "error: device: unknown device 'tpu'"),
    case("check --compile-backend nope", "error: compile-backend: unknown value 'nope'"),
]


def make_inputs(folder: Path) -> None:
    """The files INPUTS describes, in `folder`."""
    from accelbench.data.corpus import IterableCorpus
    from accelbench.data.shards import prepare
    from accelbench.data.tokenizer import get_tokenizer

    (folder / "empty.fa").write_bytes(b"")
    (folder / "headers.fa").write_text(">seq1 a header\n>seq2 another\n")
    (folder / "binary.txt").write_bytes(bytes(range(256)) * 4)
    (folder / "english.txt").write_text("The quick brown fox jumps over the lazy dog.\n")
    (folder / "afile").write_text("a file, not a folder\n")
    (folder / "cpu-profile.json").write_text(json.dumps({
        "kind": "profile", "status": "ok", "environment": {"device_type": "cpu"},
        "metrics": {"points": [], "peak_flops_per_s_by_dtype": {"fp32": 1e11}}}) + "\n")
    (folder / "bert").mkdir()
    (folder / "bert" / "config.json").write_text(json.dumps({"model_type": "bert"}) + "\n")
    (folder / "gqa3.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 192, "num_attention_heads": 6,
        "num_key_value_heads": 3, "num_hidden_layers": 2, "intermediate_size": 512,
        "vocab_size": 1024, "max_position_embeddings": 128}) + "\n")
    shards = folder / "bad-ids"
    prepare(IterableCorpus(["some text"]), get_tokenizer("gpt2"), shards, progress=False)
    index = json.loads((shards / "index.json").read_text())
    entry = index["shards"][0]
    data = np.full(entry["tokens"], 60000, dtype="<u2").tobytes()
    (shards / entry["file"]).write_bytes(data)
    entry["sha256"] = hashlib.sha256(data).hexdigest()
    (shards / "index.json").write_text(json.dumps(index, indent=1) + "\n")


def _reached(what: str):
    def fail(*args, **kwargs):
        raise AssertionError(f"bad input reached {what}")
    return fail


def run_case(case: Case, folder: Path) -> tuple[int | str | None, str, str]:
    """Run the command line in this process with `folder` for {dir}: (exit code, stdout,
    stderr). Opening the results store, building a model or preparing shards fails it."""
    argv = [part.format(dir=folder) for part in case.argv]
    out, err = io.StringIO(), io.StringIO()
    guards = (
        mock.patch("accelbench.store.store.ResultStore.__init__", _reached("the store")),
        mock.patch("accelbench.models.gpt.GPT.__init__", _reached("a model")),
        mock.patch("accelbench.models.gpt.Block.__init__", _reached("a model")),
        mock.patch("accelbench.cli.data.prepare", _reached("shard preparation")),
        mock.patch.dict(os.environ, {"ACCELBENCH_DB": str(folder / "results.db")}),
        mock.patch.object(sys, "argv", ["accelbench", *argv]),
        # the parser names the program from __main__.__package__ (under pytest: python -m pytest)
        mock.patch.object(sys.modules["__main__"], "__package__", None),
        contextlib.redirect_stdout(out), contextlib.redirect_stderr(err),
    )
    code: int | str | None = None
    with contextlib.ExitStack() as stack:
        for guard in guards:
            stack.enter_context(guard)
        try:
            main()
        except SystemExit as stop:
            code = stop.code
    return code, out.getvalue(), err.getvalue()


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("inputs")
    make_inputs(folder)
    return folder


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c.argv) for c in CASES])
def test_bad_input_is_one_line_and_exit_2_before_anything(case: Case, inputs: Path) -> None:
    before = _tree(inputs)
    code, out, err = run_case(case, inputs)
    assert code == 2, err
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(case.expected.format(dir=inputs)), err
    assert not (inputs / "results.db").exists()
    assert _tree(inputs) == before  # no shard folder, no output file, no database


def test_every_command_is_covered() -> None:
    """A new command gets its bad-input cases here (and so in docs/bad-input.md)."""
    from accelbench.cli.main import _COMMAND_MODULES
    from accelbench.config.workload import workloads

    covered = {c.argv[0] for c in CASES}
    others = {"results", "report", "study", "workloads"}  # their own files: their own tests
    commands = {*_COMMAND_MODULES, *(w.name for w in workloads())}
    assert commands - others <= covered


@pytest.mark.slow  # runs every case of docs/bad-input.md (~3 s)
def test_doc_is_current() -> None:
    """docs/bad-input.md is what scripts/bad_input_table.py writes (run it after a change)."""
    spec = importlib.util.spec_from_file_location("bad_input_table",
                                                  REPO / "scripts" / "bad_input_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert DOC.read_text() == script.render(), \
        "docs/bad-input.md is stale: run python scripts/bad_input_table.py"


@pytest.mark.parametrize("argv,expected", [
    ("train --nproc 9", "error: nproc: 9 CPU ranks on 2 cores (allowed: 1 to 8 (4 a core at "
     "most))"),
    ("scale --devices 1,9", "error: devices: 9 CPU ranks on 2 cores"),
    ("calibrate --nproc 9", "error: nproc: 9 CPU ranks on 2 cores (allowed: 2 to 8 (4 a core "
     "at most))"),
    ("data prepare --source {dir}/english.txt --out {dir}/shards --workers 9", "error: workers: "
     "9 tokenizer processes on 2 cores (allowed: 1 to 8 (4 a core at most))"),
])
def test_ranks_beyond_the_machine_are_refused(argv, expected, inputs, monkeypatch) -> None:
    """--nproc (and scale's counts) and data's --workers against this machine: a few CPU
    processes a core (the core count is the machine's, so these are not in the page)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    device = "" if argv.startswith("data") else " --device cpu"
    code, out, err = run_case(case(argv + device, ""), inputs)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(expected.format(dir=inputs))


def test_ranks_need_one_accelerator_each(monkeypatch) -> None:
    import torch

    from accelbench.bench.train import spec as train_spec
    from accelbench.config.errors import ConfigError
    from accelbench.config.presets import get_preset

    monkeypatch.setattr(train_spec, "device_count", lambda kind: 1)
    spec = train_spec.TrainSpec(get_preset("gpt2-tiny"), nproc=2)
    with pytest.raises(ConfigError, match="nproc: 2 ranks need 2 cuda devices, this machine "
                       r"has 1 \(allowed: 1 to 1\)"):
        train_spec._check_ranks(spec, torch.device("cuda"))
