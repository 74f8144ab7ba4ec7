"""The built-in workloads, each declared once (config/workload.py says what a declaration
holds). Only light modules are imported here (options dataclasses, metrics classes): the spec
builders, runners and study planners are named as text and imported when used, so the command
line is built without torch. Registered in this order, which is the order of the workloads'
commands in `accelbench --help` and of the names a study's error lists.

The longest-sequence search is not a workload of its own: it is genslm's `--longest-seq`, and
its probes are genslm's `seq-search` records.
"""

from __future__ import annotations

from accelbench.bench.block_options import BlockOptions
from accelbench.bench.calibrate.spec import CalibrateOptions
from accelbench.bench.noise_options import NoiseOptions
from accelbench.bench.train.options import (
    GENSLM_DEFAULTS,
    SCALE_DEFAULTS,
    SCALE_SKIPS,
    GenslmOptions,
    ScaleOptions,
    TrainOptions,
)
from accelbench.config.schema import (
    BlockMetrics,
    NoiseMetrics,
    PeakMetrics,
    ProfileMetrics,
    ScaleMetrics,
    SeqSearchMetrics,
    TrainMetrics,
)
from accelbench.config.workload import Workload, get_workload, register

# The options one sweep takes as comma lists (build_spec's, build_block_spec's); an axis over
# any other option is one sweep per value.
TRAIN_AXES = ("seq", "micro_batch", "gas", "dtype", "recompute", "sparsity")
BLOCK_AXES = ("batch", "dtype")
SCALE_AXES = ("devices",)  # a scaling study is one cell at several counts

_STUDY = "accelbench.bench.study"
_TRAINING = {"train": TrainMetrics, "peak": PeakMetrics}

BUILT_IN = (
    Workload(
        "block", "Time one transformer block's forward and backward over batch x dtype "
        "(study figs 3-4).", BlockOptions, {"block": BlockMetrics, "peak": PeakMetrics},
        build="accelbench.bench.block:build_block_spec", run="accelbench.bench.block:run_block",
        plan=f"{_STUDY}:plan_block", axes=BLOCK_AXES,
        outputs=("db", "json_out", "csv_out", "output", "rerun", "remeasure_peak", "wide")),
    Workload(
        "train", "Run real training steps and report tokens/s, TFLOPS, MFU, HFU, memory and "
        "loss.", TrainOptions, _TRAINING,
        build="accelbench.bench.train.options:build_spec",
        run="accelbench.bench.train.sweep:run_train_sweep", plan=f"{_STUDY}:plan_train",
        axes=TRAIN_AXES),
    Workload(
        "genslm", "GenSLM training on genomes: codons/s, TFLOPS, MFU, HFU, memory, loss; "
        "longest sequence.", GenslmOptions, {**_TRAINING, "seq-search": SeqSearchMetrics},
        build="accelbench.bench.train.options:build_genslm_spec",
        run="accelbench.bench.train.sweep:run_train_sweep", plan=f"{_STUDY}:plan_genslm",
        axes=TRAIN_AXES, defaults=GENSLM_DEFAULTS),
    Workload(
        "scale", "Run one training cell at each device count and report table II's columns.",
        ScaleOptions, {**_TRAINING, "scale": ScaleMetrics},
        build="accelbench.bench.train.options:build_scale_spec",
        run="accelbench.bench.scale:run_scale_sweep", plan=f"{_STUDY}:plan_scale",
        axes=SCALE_AXES, defaults=SCALE_DEFAULTS, skip=SCALE_SKIPS),
    Workload(
        "calibrate", "Time GEMMs, fused attention, memory, the loss, embedding, optimizer and "
        "collectives;\nstore the profile.", CalibrateOptions, {"profile": ProfileMetrics},
        build="accelbench.bench.calibrate.spec:build_calibrate",
        run="accelbench.bench.calibrate.run:run_calibration",
        outputs=("db", "json_out", "wide")),
    Workload(
        "noise", "The noise floor: one training configuration measured as two identical "
        "conditions,\ninterleaved over trials, and their difference with its interval.",
        NoiseOptions, {"noise": NoiseMetrics, "noise-cell": TrainMetrics, "peak": PeakMetrics},
        build="accelbench.bench.noise:build_noise_spec", run="accelbench.bench.noise:run_noise",
        plan=f"{_STUDY}:plan_noise",  # a study's noise floor (accelbench run measures it)
        outputs=("db", "json_out", "csv_out", "output", "wide")),  # no --rerun: always measures
)

for _workload in BUILT_IN:
    if get_workload(_workload.name) is None:  # a reload (tests) registers nothing twice
        register(_workload)
