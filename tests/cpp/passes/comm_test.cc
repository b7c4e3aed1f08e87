// Tests of passes/comm.
