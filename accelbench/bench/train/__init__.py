"""The one training runner: a single device is the world-size-1 layout of the same code.

spec (what a sweep runs, its cells and their layout), batches (data on the device), build (model,
placement, optimizer), steps (the step loop of one rank), metrics (one builder for every cell),
cell (one cell's outcome), fit (what fits), search (the longest sequence), launch (process groups
and torchrun launches), sweep (the entry point: run_train_sweep).
"""
