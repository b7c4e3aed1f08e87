// Filled in by the amp pass.
