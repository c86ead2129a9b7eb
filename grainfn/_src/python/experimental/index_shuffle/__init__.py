"""Grain's internal package `grain._src.python.experimental.index_shuffle`, for its paths."""
