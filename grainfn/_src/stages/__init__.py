"""The built-in stages, one module per stage: its dataset, stream, state and `fn` function."""
