"""The HTTP surface: the OpenAI-compatible proxy, the memory API, the admin page, API docs.

Handlers parse and answer requests; memory rules live in ``gateway.memory`` and Redis in
``gateway.storage``, which nothing here imports.
"""
