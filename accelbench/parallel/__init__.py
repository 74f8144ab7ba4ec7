"""parallel layer: layouts on a (pp, dp, tp) device mesh, TP/SP -> recompute -> compile ->
DDP/ZeRO/FSDP2 placement, pipeline stages, torchrun/Slurm launching and rank result combining.

The layout and its rules are accelbench.config.layout's (Layout, parse_layout, validate_layout).
Modules: dist (init_distributed, make_mesh), apply (prepare_model, micro_batch_context), optim
(make_optimizer, clip_grad_norm_, local_state_bytes), pipeline (PipelineRunner), launch
(launch_torchrun, sbatch_script), gather (gather_rank_results),
collectives (profile_collectives, bubble, comm_bytes_per_step: what this implementation sends;
ideal_comm_bytes_per_step). See docs/parallel.md.
"""
