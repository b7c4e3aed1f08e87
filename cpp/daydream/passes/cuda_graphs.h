// Filled in by the cuda_graphs pass.
