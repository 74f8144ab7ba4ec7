"""The values Emani et al. (2023) state, drawn beside ours as the study's published figures,
each with its system and where the paper gives it. Only values the paper's text states:
its table cells that were not available are not guessed."""

from __future__ import annotations

from dataclasses import dataclass

PAPER = ("Emani et al., \"A Comprehensive Performance Study of Large Language Models on Novel "
         "AI Accelerators\", 2023 (arXiv:2310.04607)")


def cite(where: str) -> str:
    """'Emani et al. 2023, table II'."""
    return f"Emani et al. 2023, {where}"


@dataclass(frozen=True)
class PublishedScaling:
    """Table II: a system's scaling efficiency for GPT-2 XL at its largest device count."""

    system: str
    devices: int
    efficiency: float
    note: str = ""


TABLE_II = (
    PublishedScaling("A100", 64, 0.758),
    PublishedScaling("CS-2", 2, 0.957),
    PublishedScaling("SN30", 64, 0.80, "about 80%; devices are RDUs"),
    PublishedScaling("Bow IPU", 64, 1.00, "superlinear, from replicated tensor sharding"),
    PublishedScaling("Gaudi2", 64, 1.04),
    PublishedScaling("MI250", 4, 0.80, "about 80%"),
)
TABLE_II_NOTE = ("precision and batch size differ from system to system in the paper; its "
                 "figure 5 states sequence length 1K while its A100 runs are described at 2K")


@dataclass(frozen=True)
class PublishedGas:
    """Figure 6: a system's throughput speedup from GAS 1 to a larger GAS."""

    system: str
    setup: str
    gas: int
    speedup: float


FIG6_GAS = (
    PublishedGas("A100", "64 GPUs, micro-batch 1, TP 1", 4, 1.74),
    PublishedGas("MI250", "4 GPUs", 4, 1.2),
    PublishedGas("A100", "local batch 32", 32, 1.74),
)


@dataclass(frozen=True)
class PublishedSparsity:
    """Figure 7 (Cerebras CS-2): a model's speedup from weight sparsity."""

    model: str
    sparsity: float | None  # None: the text does not restate the level
    speedup_low: float
    speedup_high: float


FIG7_LEVELS = (0.0, 0.6, 0.8, 0.9)  # the sparsity levels of the figure
FIG7_SPARSITY = (
    PublishedSparsity("GPT-2 XL", 0.9, 1.8, 2.0),
    PublishedSparsity("GPT-3 6.7B", None, 2.1, 2.1),
    PublishedSparsity("GPT-3 30B", None, 3.79, 3.79),
)
FIG7_LOSS = (0.9, 0.15)  # sparsity 0.9: about 15% worse loss after 3B tokens (GPT-2 XL)
FIG7_SYSTEM = "CS-2"
