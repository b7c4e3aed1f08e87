// Tests of the op_fusion pass.
