// Tests of the fused_optimizer pass.
