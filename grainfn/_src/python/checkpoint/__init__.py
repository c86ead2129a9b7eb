"""Grain's internal package `grain._src.python.checkpoint`, for its modules' paths."""
