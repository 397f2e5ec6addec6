"""Benchmarks, run from a checkout's root (``python -m bench.<name>``); not part of the wheel.
Each prints its figures as JSON; the harness they share with the tests (throwaway servers, the
emulations, the reliability scenarios) is ``testkit/``, never ``tests/``."""
