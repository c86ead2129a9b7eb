"""Elastic iteration: global batches cut from logical shards, the same on any host count."""
