// Tests of analysis/predict.
