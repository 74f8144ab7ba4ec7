"""How many layouts per second the planner evaluates (the issue asks for thousands).

Run: python benchmarks/planner_speed.py. Prints layouts/s for a few clusters, each the best
of 3 searches; the peer in the same run is a plain loop over the same evaluations without
enumeration or ranking, so the ratio shows the search's own overhead.
"""

from __future__ import annotations

import time

from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.planner import enumerate_layouts, evaluate, layout_problem, search
from accelbench.analytics.train_setup import TrainSetup
from accelbench.analytics.validation_shapes import resolve_shape

CASES = (("gpt3-175b", "a100-80gb", 128, 1536, 2048), ("megatron-1t", "a100-80gb", 384, 3072,
         2048), ("llama3-70b", "h100-sxm", 32, 512, 8192),
         ("llama3.1-405b", "h100-sxm", 2048, 2048, 8192))  # 16,384 GPUs: within 1 s of CPU


def main() -> None:
    """Print layouts/s per case."""
    for model, device, nodes, batch, seq in CASES:
        cfg, cluster = resolve_shape(model), make_cluster(device, nodes)
        setup = TrainSetup(batch, seq)
        cpu = time.process_time()
        best = max((search(cfg, cluster, setup) for _ in range(3)),
                   key=lambda r: r.layouts_per_s)
        cpu_s = (time.process_time() - cpu) / 3
        layouts = [lay for lay in enumerate_layouts(cfg, cluster, setup)
                   if layout_problem(cfg, cluster, setup, lay) is None]
        start = time.perf_counter()
        for lay in layouts:
            evaluate(cfg, cluster, setup, lay)
        plain = len(layouts) / (time.perf_counter() - start)
        print(f"{model:12s} {cluster.n_devices:5d} x {device:10s}: {best.n_evaluated:6d} layouts "
              f"in {best.elapsed_s:.3f} s = {best.layouts_per_s:9,.0f}/s (search); "
              f"evaluating all {len(layouts)} that divide: {plain:9,.0f}/s; "
              f"{best.n_fit} fit; {cpu_s:.3f} s of CPU a search")


if __name__ == "__main__":
    main()
