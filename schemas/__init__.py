"""Pydantic models: events, stored documents, LLM structured outputs and settings."""
