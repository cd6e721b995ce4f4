"""Tests of the summarizers stage."""
