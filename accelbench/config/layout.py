"""The one parallel layout: how a training job is split into ranks; no torch.

A layout splits a training job into dp x cp x tp x pp ranks (tensor innermost, then context,
then data, pipeline outermost: Megatron's order), with vp model chunks per pipeline rank, ep
expert-parallel ranks carved out of the data-parallel ones (Megatron-Core's convention: ep
divides dp, adds no ranks; dense weights replicated over dp, each expert on one rank of its ep
group and replicated over the dp / ep "expert data parallel" ranks), a ZeRO
stage, sequence parallelism, a pipeline schedule, a micro-batch, a recompute kind, and optionally
fewer layers on the first and last pipeline stages (pp_first, pp_last; Llama 3 405B's 126 layers
on 16 stages). Its text is parsed in layout_parse.py, its layers split over stages in
layer_split.py, and the rules it is checked against are layout_rules.py's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

MESH_DIMS = ("pp", "dp", "tp")  # outermost to innermost: tp ranks are neighbours (same node)
# the layers on the first / last pipeline stage; 0 = even split
LAYER_COUNT_KEYS = ("pp_first", "pp_last")


@dataclass(frozen=True)
class Layout:
    """How a job is split: dp x cp x tp x pp ranks, vp model chunks per pipeline rank, ZeRO
    stage 0-3, sequence parallelism on the tensor group (Korthikanti et al.), the pipeline
    schedule, the micro-batch in sequences, the activation recompute kind, and the layers of
    the first and last pipeline stages when they hold fewer than the others (0: even), and
    ep, the expert-parallel ranks each MoE layer's experts are split over (inside dp)."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    vp: int = 1
    zero: int = 0
    sp: bool = False
    pp_schedule: str = "1f1b"
    mb: int = 1
    recompute: str = "none"
    cp: int = 1  # context parallel: each sequence split over cp ranks (parallel/context.py)
    pp_first: int = 0
    pp_last: int = 0
    ep: int = 1  # expert parallel: carved out of dp (ep divides dp), adds no ranks

    @property
    def world_size(self) -> int:
        """Ranks (devices, processes) the layout occupies: dp x cp x tp x pp."""
        return self.dp * self.cp * self.tp * self.pp

    @property
    def mesh_shape(self) -> tuple[int, int, int]:
        """Sizes of the mesh dimensions MESH_DIMS = (pp, dp, tp)."""
        return (self.pp, self.dp, self.tp)

    @property
    def n_stages(self) -> int:
        """Pipeline stages in all (model chunks): pp x vp."""
        return self.pp * self.vp

    @property
    def uneven(self) -> bool:
        """Whether the first or last pipeline stage is given its own layer count."""
        return bool(self.pp_first or self.pp_last)

    def spans(self) -> dict[str, int]:
        """Consecutive devices each group spans: tp innermost, then cp, dp, pp (Megatron order)."""
        return {"tp": self.tp, "cp": self.tp * self.cp, "dp": self.tp * self.cp * self.dp,
                "pp": self.world_size}

    def label(self, full: bool = False) -> str:
        """The --layout string that reproduces this layout through parse_layout.

        Compact by default: dp, tp, pp and zero always, sp whenever tp > 1 (so no default
        decides it), the others only where they differ from their default (the schedule from
        the one vp implies), so a runtime layout's label is a valid runtime --layout.
        full=True writes every field the planner takes, which `accelbench plan --layout` reads
        as a complete layout.
        """
        text = f"dp={self.dp},tp={self.tp},pp={self.pp}"
        if full or self.vp > 1:
            text += f",vp={self.vp}"
        if self.cp > 1:  # cp=1 is the default everywhere, also for a full label
            text += f",cp={self.cp}"
        if self.ep > 1:  # so is ep=1
            text += f",ep={self.ep}"
        text += f",zero={self.zero}"
        if full or self.sp or self.tp > 1:
            text += f",sp={'on' if self.sp else 'off'}"
        if self.pp_schedule != default_schedule(self.vp):
            text += f",schedule={self.pp_schedule}"
        if full or self.mb != 1:
            text += f",mb={self.mb}"
        if full or self.recompute != "none":
            text += f",recompute={self.recompute}"
        for key in LAYER_COUNT_KEYS:
            if getattr(self, key):
                text += f",{key}={getattr(self, key)}"
        return text

    def to_dict(self) -> dict[str, int | bool | str]:
        """Plain dict for records and JSON."""
        return asdict(self)


def default_schedule(vp: int) -> str:
    """The schedule a layout gets when none is named: interleaved_1f1b with vp > 1, else 1f1b."""
    return "interleaved_1f1b" if vp > 1 else "1f1b"
