"""FP8 training of the transformer blocks' linear layers through torchao's float8 training
(the optional extra `fp8`; docs/train.md, FP8).

Only the blocks' nn.Linear layers are converted (QKV, attention output, the MLP's two or three):
the embeddings, the final norm and the output head stay in high precision, as torchtitan and
NeMo train FP8. A converted layer keeps its fp32 master weight; each step torchao scales and
casts its input, weight and output gradient to float8 for the three GEMMs (forward, input
gradient, weight gradient) and returns bf16; everything else runs under bf16 autocast. torchao
is imported on first use only: a machine without it runs every other precision.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import torch
from torch import nn

from accelbench.config.errors import ConfigError
from accelbench.config.global_options import THIRD_PARTY_LOGGERS
from accelbench.config.vocab import DTYPES

BLOCKS_PREFIX = "h."  # GPT.h, the blocks: the only place layers are converted
# kept in high precision inside the blocks: an MoE router's few outputs decide the routing (as
# torchtitan leaves it out); MoE experts are stacked weights, not nn.Linear, and stay too
KEPT_NAMES = ("router",)
FP8_DIM_MULTIPLE = 16  # torch._scaled_mm needs both GEMM dimensions of a weight divisible by 16




def torchao_float8():
    """torchao.float8, imported now; a ConfigError (one line, exit 2) where it cannot be."""
    # quieted while torchao imports even with --verbose: a bad-input line must stay one line
    loggers = [logging.getLogger(name) for name in THIRD_PARTY_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    allowed = f"{', '.join(DTYPES)}; fp8 after pip install 'accelbench[fp8]'"
    try:
        import torchao.float8 as float8
    except ImportError:
        raise ConfigError("dtype", "fp8 needs torchao, which is not installed here",
                          allowed) from None
    except Exception as err:  # noqa: BLE001 - a broken install: the user gets one line too
        first = str(err).splitlines()[0] if str(err) else ""
        raise ConfigError("dtype", f"fp8 needs torchao, which fails to import here "
                          f"({type(err).__name__}: {first})", allowed) from None
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    return float8


@dataclass(frozen=True)
class Float8Conversion:
    """What conversion did to one model, for the record."""

    converted: int  # the blocks' linear layers now training in float8
    kept: int  # the blocks' linear layers left in high precision (a shape float8 cannot take)
    fsdp_float8_all_gather: bool  # FSDP2 all-gathers the converted weights in float8


def float8_config(recipe: str, emulate: bool, fsdp_float8_all_gather: bool,
                  pad_inner_dim: bool = False):
    """torchao's Float8LinearConfig for a recipe name, emulated or not, with or without the
    float8 all-gather of FSDP2 (torchao offers it for tensorwise scaling only) and the zero
    padding float8 GEMMs need where an inner dimension is not a multiple of 16."""
    config = torchao_float8().Float8LinearConfig.from_recipe_name(recipe)
    return dataclasses.replace(config, emulate=emulate, pad_inner_dim=pad_inner_dim,
                               enable_fsdp_float8_all_gather=fsdp_float8_all_gather)


def _cast_to_autocast(module: nn.Module, args: tuple) -> tuple | None:
    """Cast a converted layer's input to its device's autocast dtype, as nn.Linear is cast:
    torchao does so for CUDA autocast only, so on other devices a bf16 cell would hand fp32
    inputs to the float8 GEMMs and mix widths in the backward."""
    x = args[0]
    if x.device.type != "cuda" and torch.is_autocast_enabled(x.device.type):
        return (x.to(torch.get_autocast_dtype(x.device.type)), *args[1:])
    return None


def convert_blocks(model: nn.Module, recipe: str, emulate: bool, fsdp_float8_all_gather: bool,
                   tokens_per_micro_batch: int = FP8_DIM_MULTIPLE) -> Float8Conversion:
    """Swap the blocks' nn.Linear layers for torchao's Float8Linear, in place, before the model
    is placed (compile and FSDP2 then wrap the converted layers). The tokens of a micro-batch
    are the inner dimension of the weight-gradient GEMM: padded when not a multiple of 16."""
    float8 = torchao_float8()
    chosen: list[str] = []

    def in_blocks(module: nn.Module, fqn: str) -> bool:
        if not fqn.startswith(BLOCKS_PREFIX) or fqn.rsplit(".", 1)[-1] in KEPT_NAMES:
            return False
        fits = emulate or (module.in_features % FP8_DIM_MULTIPLE == 0
                           and module.out_features % FP8_DIM_MULTIPLE == 0)
        if fits:
            chosen.append(fqn)
        return fits

    blocks = [n for n, m in model.named_modules()
              if n.startswith(BLOCKS_PREFIX) and isinstance(m, nn.Linear)]
    float8.convert_to_float8_training(
        model, module_filter_fn=in_blocks,
        config=float8_config(recipe, emulate, fsdp_float8_all_gather,
                             pad_inner_dim=tokens_per_micro_batch % FP8_DIM_MULTIPLE != 0))
    for name in chosen:
        model.get_submodule(name).register_forward_pre_hook(_cast_to_autocast)
    return Float8Conversion(len(chosen), len(blocks) - len(chosen), fsdp_float8_all_gather)


def float8_layer_names(model: nn.Module) -> list[str]:
    """The names of the layers that train in float8 (torchao's Float8Linear is not public:
    found by its class name)."""
    return [name for name, module in model.named_modules()
            if type(module).__name__ == "Float8Linear"]
