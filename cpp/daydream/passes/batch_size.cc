// Filled in by the batch_size pass.
