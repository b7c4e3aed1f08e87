// Tests of passes/scale.
