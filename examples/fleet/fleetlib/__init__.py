"""A tiny stand-in for an RL-training library, so the CPU tests test something real."""
