"""The bundled demo: a loopback model server, a small coding agent and repository, and ``agentprof demo``."""
