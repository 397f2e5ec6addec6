"""The harness the tests and the benchmarks share; not part of the wheel.

Throwaway servers (``procs``: redis-server and Celery workers; ``api_server``, ``llm_server``,
``flower``, ``tls``), the strict emulations (``mongo_emulation`` with the Atlas part in
``atlas_*``, the LLM wire formats in ``llm_wire``), process figures (``procstat``), the formed
demo store (``demo_store``), port fakes for the stages (``formation``) and the reliability
scenarios (``scenarios``). ``tests/`` and ``bench/`` import from here and never from each other.
"""
