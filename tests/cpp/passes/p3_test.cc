// Tests of the p3 pass.
