"""Tests of the Perseus pipeline-frequency planner."""
