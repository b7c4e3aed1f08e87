// Filled in by the fused_optimizer pass.
