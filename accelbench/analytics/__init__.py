"""Pure arithmetic (never imports torch): FLOPs, memory, communication, MFU/HFU, the planner."""
