"""Grain's internal package `grain._src.python.dataset.transformations`, for its modules' paths."""
