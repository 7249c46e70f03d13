"""AG-UI: events and SSE framing, run input, interrupt cohorts and whole-batch resume, the run host."""
