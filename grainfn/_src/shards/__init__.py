"""Logical shards of a stream pipeline, and Grain's worker order: a round robin over them."""
