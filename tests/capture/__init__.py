"""Tests of the capture stage."""
