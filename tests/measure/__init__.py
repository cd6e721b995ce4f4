"""Tests of the measure stage."""
