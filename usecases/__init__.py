"""The application layer (design §2): one small module per use case, with typed inputs and
outputs, called by every door (``api/``, the inspector, MCP, ``ops/``'s CLI) and by ``workers/``.

A use case composes the domain (``pipeline``) and the store's narrow ports; it knows nothing of
HTTP, Celery or the command line, and no door imports another door.
"""
