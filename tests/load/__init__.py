"""Tests of the load stage."""
