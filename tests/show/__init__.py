"""Tests of the show stage."""
