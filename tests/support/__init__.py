"""Helpers shared by the tests: pipelines, specs, waits and leak checks."""
