// Filled in by the p3 pass.
