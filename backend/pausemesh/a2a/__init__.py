"""A2A: interrupted-task projections and the A2A router."""
