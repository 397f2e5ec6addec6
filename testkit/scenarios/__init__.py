"""Reliability scenarios run by ``tests/reliability`` and by ``python -m bench.reliability``:
crashes at control points, broker and store outages, provider faults, process races."""
