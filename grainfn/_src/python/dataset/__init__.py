"""Grain's internal package `grain._src.python.dataset`, for its modules' paths."""
