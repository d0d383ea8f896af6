"""Load tests: recorded agent sessions replayed closed-loop against a real OpenAI-compatible endpoint.

``workload`` (the sessions as sent: the serving simulation's plan, narrowed), ``prompts`` (synthetic text with the
trace's lengths and prefix blocks), ``client`` (the async engine on the ``openai`` SDK), ``results`` (the measured
figures), ``predict`` (the same sessions through the serving simulation), ``run`` (one load test end to end).
"""

from agentprof.loadtest.run import LoadtestResult, loadtest

__all__ = ["LoadtestResult", "loadtest"]
