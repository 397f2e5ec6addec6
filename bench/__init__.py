"""Benchmarks, run from a checkout's root (``python -m bench.<name>``); not part of the wheel.
Each prints its figures as JSON; the reliability scenarios they share with the tests live in
``tests/reliability/scenarios/``."""
