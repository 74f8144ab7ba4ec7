"""Torch modules: the GPT decoder and its variants."""

from accelbench.models.gpt import GPT, Block

__all__ = ["GPT", "Block"]
