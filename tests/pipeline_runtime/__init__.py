"""Tests of Perseus in training: profiler, controller, runtime and the pipeline framework hooks."""
