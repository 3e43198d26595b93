"""Benchmarks that print figures (``memgate bench ...``); they run from a repository checkout
and are not part of the installed package."""
