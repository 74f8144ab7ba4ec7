"""Training-step throughput on a Llama-style model: accelbench's training step against
transformers' LlamaForCausalLM trained by a plain PyTorch loop (train_vs_hf.py's comparison:
same shape, batches and AdamW, alternating step by step in one run). Prints tokens/s of each and
the median ratio ours/theirs (target: at least 1.0).

    python benchmarks/train_vs_hf_llama.py --model llama-tiny --micro-batch 4 --seq 256 --steps 20
"""

from __future__ import annotations

from peers import hf_llama
from train_vs_hf import compare, parse_args


def main() -> None:
    compare(parse_args(__doc__.splitlines()[0], "llama-tiny"), hf_llama)


if __name__ == "__main__":
    main()
