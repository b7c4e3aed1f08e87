// Tests of passes/pipeline.
