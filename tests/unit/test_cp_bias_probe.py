"""benchmarks/cp_bias_probe.py: the context-parallel attention seam against a materialised
causal mask, on this CPU (models/prefix_attention.py's path), and the probe catches a wrong
bias: torch's lower-right CausalBias, as CUDA would be given it (materialised off CUDA), passes;
an upper-left one, the wrong alignment for a chunk at the end of its keys, fails."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from torch.nn.attention.bias import causal_lower_right, causal_upper_left

from accelbench.parallel.context import ContextShard

PATH = Path(__file__).parents[2] / "benchmarks" / "cp_bias_probe.py"
_SPEC = importlib.util.spec_from_file_location("cp_bias_probe", PATH)
probe = importlib.util.module_from_spec(_SPEC)
sys.modules["cp_bias_probe"] = probe
_SPEC.loader.exec_module(probe)

ARGS = ["--device", "cpu", "--seq", "32", "--cp", "2", "--heads", "2", "--head-dim", "8",
        "--batch", "1", "--no-compile"]


def test_every_rank_matches_the_masked_reference_forward_and_backward(tmp_path):
    out = tmp_path / "p.jsonl"
    assert probe.main([*ARGS, "--cp", "2,4", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["cp"], r["rank"]) for r in rows] == [(2, 0), (2, 1), (4, 0), (4, 1), (4, 2),
                                                     (4, 3)]
    assert all(r["ok"] and r["bias"] == "none (prefix_attention)" for r in rows)
    assert max(r["max_abs_err_dk"] for r in rows) < 1e-5


def test_the_lower_right_bias_passes_and_an_upper_left_one_is_caught(monkeypatch):
    args = probe.parse(ARGS)
    monkeypatch.setattr(ContextShard, "_causal_bias",
                        lambda self, q, k, device: causal_lower_right(q, k))
    good = probe.one_case(args, 32, 2, 1, False)
    assert good["ok"] and good["bias"] == "CausalBias"
    monkeypatch.setattr(ContextShard, "_causal_bias",
                        lambda self, q, k, device: causal_upper_left(q, k))
    bad = probe.one_case(args, 32, 2, 1, False)
    assert not bad["ok"] and bad["max_abs_err_out"] > 100 * bad["tolerance"]


def test_a_case_the_device_refuses_is_a_failed_line_and_the_others_run(monkeypatch, tmp_path):
    calls = []

    def refuse(q, k, v, spans):
        calls.append(1)
        raise RuntimeError("No available kernel. Aborting execution.")
    monkeypatch.setattr(probe, "_causal_attention", refuse)
    out = tmp_path / "p.jsonl"
    assert probe.main([*ARGS, "--out", str(out)]) == 1
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len(calls) == 2 and not any(r["ok"] for r in rows)
    assert rows[0]["error"] == "RuntimeError: No available kernel. Aborting execution."
