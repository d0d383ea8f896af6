"""``python -m agentprof``: the same command line as the ``agentprof`` script."""

from agentprof.cli import main

if __name__ == "__main__":
    main()
