// Tests of cost/collectives.
