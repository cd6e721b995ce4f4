"""Tests of the replay stage."""
