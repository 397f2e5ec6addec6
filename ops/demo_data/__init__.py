"""The bundled sample conversation of ``make demo``."""
