// Tests of passes/editor.
