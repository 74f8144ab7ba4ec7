"""Which cell a record measured, on which machine: the fingerprint that resume is keyed on.

A cell's fingerprint is the sha256 of canonical JSON (sorted keys, no spaces) of its kind, its
record spec less the fields that do not change what is measured (IGNORED_SPEC_FIELDS), and the
machine: the environment fields that identify the hardware and the software that measured it
(MACHINE_FIELDS). A sweep run again skips a cell whose fingerprint has a record with a FINISHED
status. Every rule of resume is in this module, and each field's reason is next to it; the
user's view of them is the "Resume" section of docs/results.md. Pure: no torch, no store.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from accelbench.config.record_kinds import read_spec, record_kinds
from accelbench.config.records.fields import RecordSpec

FINGERPRINT_VERSION = 1  # part of every hash: changing the rules below re-measures, never mixes

FINGERPRINT_KEY = "fingerprint"  # the record spec field a sweep stores it in (results.resume)
WORKLOAD_KEY = "workload_id"  # the record spec field holding the workload's identity (below)

# Statuses that end a cell for good on this machine: running it again would measure the same.
FINISHED = ("ok", "oom", "unsupported", "diverged")
# Statuses that say the cell was not measured to its end; resume runs it again.
RETRIED = ("error", "timeout", "interrupted")

# Record spec fields (at any depth) that do not change what a cell measures.
IGNORED_SPEC_FIELDS: dict[str, str] = {
    "cell_timeout_s": "a bound on how long a launched cell may run, not what it measures: a "
                      "cell that finished within one bound measured what it would within another",
    "hang_timeout_s": "how long a launched cell may go without progress before it is killed: "
                      "a bound, as cell_timeout_s",
    "device": "the device string as asked (auto, cuda:0): the machine part names the device "
              "(type, name, count), and which of several identical devices ran it does not "
              "change the measurement",
    "peaks": "peaks handed to launched ranks (a scaling summary's base spec) are measured "
             "numbers, not choices",
    "disturbance_threshold": "where a window counts as disturbed: a judgement of the "
                             "measurement, recorded with it, not a change to it",
    FINGERPRINT_KEY: "the fingerprint itself",
    WORKLOAD_KEY: "derived from the spec (workload_identity): it adds nothing to it",
}

# Fields added to a spec (or to its model or layout) after fingerprint version 1, with the
# default that measures what the cell measured before they existed: at that default they are
# left out of the hash, so a cell recorded by an older accelbench keeps its fingerprint and a
# resumed sweep skips it; at any other value they are hashed (they change the measurement).
ADDED_AT_DEFAULT: dict[str, dict[str, Any]] = {
    "": {"fp8_recipe": None, "trials": 1,  # trials: a record before them measured one
         "loss_impl": "torch", "compute_weights": "fp32", "compile_scope": "blocks"},
    "layout": {"cp": 1, "ep": 1, "pp_first": 0, "pp_last": 0},
    "model": {"norm": "layernorm", "bias": True, "qkv_bias": False, "n_kv_head": 0,
              "rotary_base": 10000.0, "rope_scaling": "none", "rope_factor": 8.0,
              "rope_low_freq_factor": 1.0, "rope_high_freq_factor": 4.0,
              "rope_original_positions": 8192, "n_experts": 0, "moe_top_k": 2,
              "moe_gate": "softmax", "moe_norm_topk": True, "n_shared_experts": 0,
              "moe_shared_gate": False, "moe_ffn_dim": 0, "capacity_factor": 0.0,
              "aux_loss_coef": 0.0, "moe_every": 1, "moe_first_dense": 0},
}

# Environment fields that identify the machine and its software.
MACHINE_FIELDS: dict[str, str] = {
    "device_type": "cpu, cuda, xpu, ...",
    "device_name": "the accelerator (or CPU) model",
    "device_count": "devices visible: another count is another machine for multi-device cells",
    "device_capability": "CUDA compute capability, where there is one",
    "driver_version": "the NVIDIA driver, where there is one: kernels and clocks change with it",
    "cuda_runtime": "CUDA runtime torch was built with",
    "hip_runtime": "ROCm runtime torch was built with",
    "torch": "the torch version: kernels, compile and allocator change between releases",
    "python": "major.minor only (see _MACHINE_NORMALISE): a new interpreter, not a patch release",
    "cpu": "CPU model",
    "cpu_count": "cores visible: sets CPU throughput and the data loader's share",
    "torch_threads": "intra-op threads: a CPU cell at 1 thread is not the cell at 16",
    "host": "host name: another node is another machine, even of the same kind",
}

# Environment fields deliberately left out of the machine part, and why.
NOT_MACHINE_FIELDS: dict[str, str] = {
    "git_revision": "every commit would otherwise measure every cell again; a change in how a "
                    "cell is measured shows in its spec (flops_formula, new fields) or in "
                    "FINGERPRINT_VERSION, and --rerun measures again on demand",
    "accelbench": "the package version, for the same reason as the git revision",
    "os": "the OS string holds the kernel release, which updates often and is not the "
          "software that measures (the driver and torch are in the machine part)",
    "device_spec_key": "derived from the device name by accelbench's own table",
}


def _python_minor(version: Any) -> Any:
    """'3.11.7' -> '3.11'."""
    return ".".join(str(version).split(".")[:2]) if version is not None else None


_MACHINE_NORMALISE = {"python": _python_minor}


def canonical_json(value: Any) -> str:
    """The one text of a value that hashes the same wherever it came from (a tuple and the list
    it reads back as are one; keys sorted; no whitespace; other types as str, as records are)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _kept(key: str, value: Any, parent: str) -> bool:
    """Whether a spec field counts: not ignored, and not a later field at its old default."""
    added = ADDED_AT_DEFAULT.get(parent, {})
    return key not in IGNORED_SPEC_FIELDS and not (key in added and added[key] == value)


def spec_identity(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec without IGNORED_SPEC_FIELDS at any depth, nor ADDED_AT_DEFAULT fields at
    their defaults (top level, and in any dict held under 'model' or 'layout')."""
    def strip(value: Any, parent: str) -> Any:
        if isinstance(value, dict):
            return {k: strip(v, k) for k, v in value.items() if _kept(k, v, parent)}
        if isinstance(value, list | tuple):
            return [strip(v, parent) for v in value]
        return value

    return strip(spec, "")


def machine_identity(environment: dict[str, Any]) -> dict[str, Any]:
    """The MACHINE_FIELDS of an environment (absent ones as None), normalised."""
    return {key: _MACHINE_NORMALISE.get(key, lambda v: v)(environment.get(key))
            for key in MACHINE_FIELDS}


def _sha256(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def machine_fingerprint(environment: dict[str, Any]) -> str:
    """The machine and its software, as one hash (tells machines apart across databases)."""
    return _sha256({"version": FINGERPRINT_VERSION, "machine": machine_identity(environment)})


def cell_fingerprint(kind: str, spec: dict[str, Any], environment: dict[str, Any]) -> str:
    """One cell of one kind on one machine, as one hash."""
    return _sha256({"version": FINGERPRINT_VERSION, "kind": kind, "spec": spec_identity(spec),
                    "machine": machine_identity(environment)})


# What makes two cells one workload, whichever machine ran them: machines are compared only on
# identical workloads. The split of a global batch into micro-batches and accumulation steps,
# recompute, compile and the software are how a machine ran it (the report's fairness section
# lists them), not what it ran.
WORKLOAD_FIELDS: dict[str, str] = {
    "benchmark": "train or genslm: the corpus and tokenizer family (a block cell is 'block')",
    "model": "the model's shape (a preset's, or the checkpoint's config), not its name",
    "seq_len": "tokens a sequence",
    "global_batch": "sequences a step: a block cell's batch; a training cell's micro-batch x "
                    "gradient accumulation x data-parallel replicas",
    "dtype": "the training precision",
    "fp8_recipe": "an fp8 cell's scaling recipe",
    "layout": "how the model is split over devices (dp, tp, pp, cp, ep, zero, ...)",
    "sparsity": "weight sparsity, with its pattern and mask kind",
    "sparsity_pattern": "",
    "sparsity_mask": "",
}


def global_batch(spec: RecordSpec) -> Any:
    """Sequences a step: a block cell's batch, or micro-batch x accumulation x data-parallel
    replicas (None where the spec does not say)."""
    if spec.batch is not None:
        return spec.batch
    dp = (spec.layout or {}).get("dp", 1)
    mb, gas = spec.micro_batch, spec.gas
    return None if mb is None or gas is None else mb * gas * dp


def workload_identity(kind: str, spec: dict[str, Any]) -> dict[str, Any] | None:
    """The WORKLOAD_FIELDS of a cell's spec (a model's later fields at their defaults left out,
    as for the cell fingerprint); None for a record that is not a cell of a workload."""
    declared = record_kinds().get(kind)
    if declared is None or not declared.cell:
        return None
    s = read_spec(kind, spec)
    model = {k: v for k, v in (s.model or {}).items() if k != "name"}
    layout = s.layout  # its recompute is how the cell ran, not what
    layout = {k: v for k, v in layout.items() if k != "recompute"} if layout else layout
    values = {"benchmark": kind if s.benchmark is None else s.benchmark, "model": model,
              "layout": layout, "global_batch": global_batch(s)}
    values.update({key: getattr(s, key) for key in WORKLOAD_FIELDS if key not in values})
    return spec_identity(values)


def workload_id(kind: str, spec: dict[str, Any]) -> str | None:
    """A short stable hash of the workload identity (12 hex digits), or None."""
    identity = workload_identity(kind, spec)
    return None if identity is None else _sha256({"workload": identity})[:12]


def stamped_spec(kind: str, spec: dict[str, Any], environment: dict[str, Any],
                 asked: dict[str, Any] | None = None) -> dict[str, Any]:
    """The spec a record stores: with the fingerprint of the cell as asked (`asked`, where a
    search made the measured spec differ from it; else the spec itself) on this machine, and
    the workload it measured (WORKLOAD_KEY, from the spec as measured)."""
    key = asked if asked is not None else spec
    stamped = {**spec, FINGERPRINT_KEY: cell_fingerprint(kind, key, environment)}
    workload = workload_id(kind, spec)
    return stamped if workload is None else {**stamped, WORKLOAD_KEY: workload}
