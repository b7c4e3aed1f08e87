// Tests of the amp pass.
