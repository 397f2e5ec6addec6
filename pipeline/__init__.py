"""The memory pipeline's domain: pure decisions, ports and their adapters. No Celery here."""
