// Tests of the batch_size pass.
