// Tests of passes/registry.
