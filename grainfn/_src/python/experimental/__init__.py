"""Grain's internal package `grain._src.python.experimental`, for its modules' paths."""
