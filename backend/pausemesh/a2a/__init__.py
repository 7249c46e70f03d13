"""A2A without a web framework: the interrupted-task projection, reading follow-up answers,
durable pauses for a host's ``AgentExecutor`` (``A2aPauses``), the versioned task store over
the thread store, one follow-up per task at a time, and push notifications (configurations,
URL policy, signing, delivery). The HTTP endpoint that serves them is ``web/a2a_mount.py``."""
