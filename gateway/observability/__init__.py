"""Observability: Prometheus metrics and structured logs."""
