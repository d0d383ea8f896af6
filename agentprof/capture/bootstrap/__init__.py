"""Holds the ``sitecustomize`` that ``agentprof run`` puts on the child's ``PYTHONPATH``."""
