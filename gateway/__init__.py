"""memgate: an OpenAI-compatible proxy that gives chat apps careful long-term memory."""

__version__ = "0.1.0"
