"""The DataLoader's core: samplers, sharding, operations on records, and the loader's stream."""
