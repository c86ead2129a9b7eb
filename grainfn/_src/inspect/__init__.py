"""Pipeline inspection: describe as a tree, trace an element, time stages, draw the graph."""
