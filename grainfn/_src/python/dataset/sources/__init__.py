"""Grain's internal package `grain._src.python.dataset.sources`, for its modules' paths."""
