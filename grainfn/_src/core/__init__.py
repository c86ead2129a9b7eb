"""The core of grainfn: datasets, streams, cursors, states, and reading them."""
