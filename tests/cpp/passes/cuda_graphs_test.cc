// Tests of the cuda_graphs pass.
