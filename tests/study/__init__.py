"""Tests of the study stage."""
