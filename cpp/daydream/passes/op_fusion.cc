// Filled in by the op_fusion pass.
