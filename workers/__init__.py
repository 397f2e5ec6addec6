"""Celery lives here and only here: the app, its configuration and thin task modules."""
