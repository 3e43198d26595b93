"""Prometheus metrics for memgate.

Every metric lives on a :class:`Metrics` instance that owns its own
``CollectorRegistry``, so several apps (tests) can coexist in one process and
``GET /metrics`` serves exactly this app's series via :meth:`Metrics.render`.

Naming follows Prometheus conventions: one ``memgate_`` prefix, base units
(seconds), ``_total`` for counters, ``_seconds`` for duration histograms.
Labels are few and bounded: never a user, tenant or project id. The allowed
values of each label are the tuples below; the ``normalize_*`` helpers map
anything unexpected onto a bounded fallback so a bug can't explode cardinality.

Small label sets are pre-initialised to zero so ``rate()`` and the dashboards
return data (zeros) before the first event.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.multiprocess import MultiProcessCollector

# The ``*_created`` companion series double the series count and nothing here uses them.
disable_created_metrics()

# --- bounded label values -------------------------------------------------------------------

ROUTES = ("chat", "responses", "passthrough", "memory_api", "admin", "other")
# Routes that call the upstream LLM (upstream latency / time to first byte).
UPSTREAM_ROUTES = ("chat", "responses", "passthrough")
MEMORY_MODES = ("on", "off", "dry-run", "none")
STREAM_VALUES = ("true", "false")
RECALL_STAGES = ("embed", "search", "filter", "total")
# Recall's checks, in the order it runs them (``selection.first_failure``, then the recaller's
# conflict and sensitivity checks). "paused" stays a pre-initialised value for dashboards,
# though a paused user's recall now stops before any candidate is found (its trace says so)...
RECALL_CHECKS = (
    "expired",
    "scope",
    "source",
    "threshold",
    "superseded",
    "conflict",
    "sensitivity",
    "paused",
)
# ... and every reason recall can leave a candidate out for: the checks, then the cuts.
DROP_REASONS = (*RECALL_CHECKS, "limit", "budget")
CANDIDATE_OUTCOMES = (
    "queued",
    "refused_sensitive",
    "refused_one_time",
    "refused_inference",
    "duplicate",
    "rejected_before",
    "invalid",
)
CANDIDATE_DECISIONS = ("confirmed", "rejected", "edited")
MEMORY_STATUSES = ("active", "superseded", "archived")
# Ages (days since saved) at which the share of memories never injected is sampled.
UNUSED_AFTER_DAYS = (7, 30)
UPSTREAM_ERROR_KINDS = ("connect", "timeout", "stream_cut", "http_4xx", "http_5xx")
BACKEND_COMPONENTS = ("redis", "embedder", "miner")
# Writes made off the response path, and why one was lost.
BACKGROUND_TASKS = ("trace", "use_count", "mining")
BACKGROUND_FAILURES = ("error", "overflow", "shutdown")
# Why a job the LLM extractor could not handle was mined with the rules instead.
EXTRACTOR_FALLBACK_REASONS = ("unauthorized", "upstream_error", "malformed")

# Token and upstream latency series carry the request's ``model``. The label is bounded: an
# operator's allow-list (``MEMGATE_METRICS_MODELS``), or else the first ``MODEL_LABEL_CAP`` models
# the upstream answered successfully (a client cannot fill the slots with names the upstream
# refuses); every other model, and a request with none, is ``other``.
OTHER_MODEL = "other"
MODEL_LABEL_CAP = 20
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}")

# --- buckets --------------------------------------------------------------------------------

# Whole-request and upstream latency: LLM calls can take minutes.
LATENCY_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
    120.0, 300.0, 600.0,
)  # fmt: skip
# Time the gateway itself adds, and recall stages: fine-grained, sub-millisecond up.
FINE_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)  # fmt: skip
# Memories injected into one request.
COUNT_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)

_PREFIX = "memgate_"
# Set (by ``memgate serve --workers N``) before prometheus-client is imported in a worker: each
# worker then writes its series to files there and a scrape adds up every worker's.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def _pick(value: object, allowed: tuple[str, ...], fallback: str) -> str:
    text = str(value)
    return text if text in allowed else fallback


def normalize_route(route: str | None) -> str:
    """A route label from ``ROUTES``; anything unknown becomes ``other``."""
    return _pick(route, ROUTES, "other")


def normalize_memory_mode(mode: str | None) -> str:
    """A memory_mode label from ``MEMORY_MODES``; anything unknown becomes ``none``."""
    return _pick(mode, MEMORY_MODES, "none")


def normalize_code(code: int | str) -> str:
    """An HTTP status code as a label: ``"200"``; anything that is not 100..599 is ``"other"``."""
    try:
        number = int(code)
    except (TypeError, ValueError):
        return "other"
    return str(number) if 100 <= number <= 599 else "other"


def stream_label(stream: bool | str) -> str:
    """``"true"`` / ``"false"`` for the stream label."""
    if isinstance(stream, str):
        return "true" if stream.lower() == "true" else "false"
    return "true" if stream else "false"


def upstream_error_kind_for_status(status: int) -> str:
    """``http_4xx`` or ``http_5xx`` for an upstream HTTP error status."""
    return "http_5xx" if status >= 500 else "http_4xx"


class Metrics:
    """All memgate metrics, registered on a private ``CollectorRegistry``.

    Attributes are the ``prometheus_client`` metric objects; use them directly, e.g.
    ``metrics.requests.labels(route="chat", code="200", memory_mode="on").inc()`` or
    ``metrics.recall_duration.labels(stage="embed").observe(0.004)``.
    """

    def __init__(
        self,
        version: str,
        registry: CollectorRegistry | None = None,
        *,
        models: Iterable[str] | None = None,
    ) -> None:
        self.version = version
        self._allowed_models = frozenset(models) if models is not None else None
        self._seen_models: set[str] = set()
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        p = _PREFIX
        self._multiprocess = multiprocess_dir()
        if registry is None and self._multiprocess is None:
            # The standard process_* (CPU, memory, open files) and python_* (GC, version)
            # series. With several workers they are left out: each worker is its own process
            # and a scrape reaches only one of them, so its figures would jump between workers.
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                r.register(collector)

        # --- traffic and latency ---
        self.requests = Counter(
            p + "requests_total",
            "HTTP requests handled, by route, response status code and memory mode.",
            ["route", "code", "memory_mode"],
            registry=r,
        )
        self.request_duration = Histogram(
            p + "request_duration_seconds",
            "Whole-request latency as seen by the gateway (to the last byte of the response).",
            ["route", "stream"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.upstream_duration = Histogram(
            p + "upstream_duration_seconds",
            "Latency of the upstream LLM call (to the last byte of the upstream response).",
            ["route", "stream", "model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.overhead_duration = Histogram(
            p + "overhead_duration_seconds",
            "Time the gateway adds to a request (request duration minus upstream duration).",
            ["route"],
            buckets=FINE_BUCKETS,
            registry=r,
        )
        self.ttfb = Histogram(
            p + "time_to_first_byte_seconds",
            "Time from request start to the first response byte sent to the client.",
            ["route", "model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )

        # --- recall ---
        self.recall_duration = Histogram(
            p + "recall_duration_seconds",
            "Memory recall latency by stage (embed, search, filter, total).",
            ["stage"],
            buckets=FINE_BUCKETS,
            registry=r,
        )
        self.memories_injected = Histogram(
            p + "memories_injected",
            "Memories injected into one chat request.",
            buckets=COUNT_BUCKETS,
            registry=r,
        )
        self.injected_tokens = Counter(
            p + "injected_tokens_total",
            "Prompt tokens added by injected memories.",
            ["model"],
            registry=r,
        )
        self.prompt_tokens = Counter(
            p + "prompt_tokens_total",
            "Prompt tokens: the upstream's usage.prompt_tokens, or counted by memgate when the "
            "upstream reports none.",
            ["model"],
            registry=r,
        )
        self.completion_tokens = Counter(
            p + "completion_tokens_total",
            "Completion tokens reported by the upstream (usage.completion_tokens).",
            ["model"],
            registry=r,
        )
        self.recall_dropped = Counter(
            p + "recall_dropped_total",
            "Recalled memories dropped before injection, by reason.",
            ["reason"],
            registry=r,
        )
        self.conflicts = Counter(
            p + "conflicts_total",
            "Conflicting memories detected at recall or write time.",
            registry=r,
        )
        self.corrections = Counter(
            p + "corrections_total",
            "Corrections of remembered facts (a user said a recalled memory was wrong).",
            registry=r,
        )

        # --- candidates (memory writes) ---
        self.candidates = Counter(
            p + "candidates_total",
            "Memory candidates proposed by the miner, by outcome.",
            ["outcome"],
            registry=r,
        )
        self.extractor_fallbacks = Counter(
            p + "extractor_fallbacks_total",
            "Mining jobs the LLM extractor could not handle (mined by the rules), by reason.",
            ["reason"],
            registry=r,
        )
        self.candidate_decisions = Counter(
            p + "candidate_decisions_total",
            "Decisions on queued memory candidates, by decision.",
            ["decision"],
            registry=r,
        )
        self.pending_candidates = Gauge(
            p + "pending_candidates",
            "Memory candidates waiting for a decision (sampled).",
            registry=r,
            multiprocess_mode="mostrecent",
        )
        self.memories = Gauge(
            p + "memories",
            "Stored memories by status (sampled).",
            ["status"],
            registry=r,
            multiprocess_mode="mostrecent",
        )

        self.memories_aged = Gauge(
            p + "memories_aged",
            "Active memories saved more than after_days days ago (sampled).",
            ["after_days"],
            registry=r,
            multiprocess_mode="mostrecent",
        )
        self.memories_never_injected = Gauge(
            p + "memories_never_injected",
            "Active memories saved more than after_days days ago and never injected (sampled).",
            ["after_days"],
            registry=r,
            multiprocess_mode="mostrecent",
        )

        # --- errors and build ---
        self.upstream_errors = Counter(
            p + "upstream_errors_total",
            "Failed upstream calls, by kind.",
            ["kind"],
            registry=r,
        )
        self.backend_errors = Counter(
            p + "backend_errors_total",
            "Errors in memory backends, by component.",
            ["component"],
            registry=r,
        )
        self.background_failures = Counter(
            p + "background_failures_total",
            "Writes off the response path (traces, use counts, mining jobs) that were lost, "
            "by task and reason (error after retries, overflow of the bound, shutdown).",
            ["task", "reason"],
            registry=r,
        )
        self.mining_queued = Counter(
            p + "mining_queued_total",
            "Finished exchanges queued for mining (directly or from the retry buffer).",
            registry=r,
        )
        self.mining_buffered = Gauge(
            p + "mining_buffered",
            "Finished exchanges held in process while Redis is unavailable, to be queued.",
            registry=r,
        )
        self.recall_over_budget = Counter(
            p + "recall_over_budget_total",
            "Chat requests answered without memory because recall passed its time budget.",
            registry=r,
        )
        self.redis_restarts = Counter(
            p + "redis_restarts_total",
            "Restarts of the embedded Redis after it died.",
            registry=r,
        )
        self.build_info = Gauge(
            p + "build_info",
            "Build information; the value is always 1.",
            ["version"],
            registry=r,
            multiprocess_mode="max",
        )
        self.build_info.labels(version=version).set(1)

        self._preinitialise()

    def _preinitialise(self) -> None:
        """Create every small, known label combination at zero."""
        for route in ROUTES:
            for stream in STREAM_VALUES:
                self.request_duration.labels(route=route, stream=stream)
            self.overhead_duration.labels(route=route)
        for route in UPSTREAM_ROUTES:
            for stream in STREAM_VALUES:
                self.upstream_duration.labels(route=route, stream=stream, model=OTHER_MODEL)
            self.ttfb.labels(route=route, model=OTHER_MODEL)
        for counter in (self.prompt_tokens, self.completion_tokens, self.injected_tokens):
            counter.labels(model=OTHER_MODEL)
        for stage in RECALL_STAGES:
            self.recall_duration.labels(stage=stage)
        for reason in DROP_REASONS:
            self.recall_dropped.labels(reason=reason)
        for outcome in CANDIDATE_OUTCOMES:
            self.candidates.labels(outcome=outcome)
        for decision in CANDIDATE_DECISIONS:
            self.candidate_decisions.labels(decision=decision)
        for reason in EXTRACTOR_FALLBACK_REASONS:
            self.extractor_fallbacks.labels(reason=reason)
        for status in MEMORY_STATUSES:
            self.memories.labels(status=status).set(0)
        for days in UNUSED_AFTER_DAYS:
            self.memories_aged.labels(after_days=str(days)).set(0)
            self.memories_never_injected.labels(after_days=str(days)).set(0)
        for kind in UPSTREAM_ERROR_KINDS:
            self.upstream_errors.labels(kind=kind)
        for component in BACKEND_COMPONENTS:
            self.backend_errors.labels(component=component)
        for task in BACKGROUND_TASKS:
            for reason in BACKGROUND_FAILURES:
                self.background_failures.labels(task=task, reason=reason)

    # --- conveniences (label normalisation in one place) ---

    def model_label(self, model: object, *, accepted: bool) -> str:
        """The ``model`` label for a request's model; ``accepted``: the upstream answered it
        with success, so it may take one of the free label slots when no allow-list is set."""
        if not isinstance(model, str):
            return OTHER_MODEL
        if self._allowed_models is not None:
            return model if model in self._allowed_models else OTHER_MODEL
        if model in self._seen_models:
            return model
        if accepted and len(self._seen_models) < MODEL_LABEL_CAP and _MODEL_NAME.fullmatch(model):
            self._seen_models.add(model)
            return model
        return OTHER_MODEL

    def observe_request(
        self,
        route: str,
        code: int | str,
        memory_mode: str | None,
        duration: float,
        *,
        stream: bool = False,
    ) -> None:
        """Count one finished request and observe its total duration (seconds)."""
        route = normalize_route(route)
        self.requests.labels(
            route=route, code=normalize_code(code), memory_mode=normalize_memory_mode(memory_mode)
        ).inc()
        self.request_duration.labels(route=route, stream=stream_label(stream)).observe(
            max(duration, 0.0)
        )

    def observe_upstream(
        self, route: str, duration: float, *, stream: bool = False, model: str = OTHER_MODEL
    ) -> None:
        """Observe the upstream call duration (seconds); ``model`` from :meth:`model_label`."""
        self.upstream_duration.labels(
            route=normalize_route(route), stream=stream_label(stream), model=model
        ).observe(max(duration, 0.0))

    def observe_overhead(self, route: str, duration: float) -> None:
        """Observe the time the gateway added (seconds; negative values clamp to 0)."""
        self.overhead_duration.labels(route=normalize_route(route)).observe(max(duration, 0.0))

    def observe_ttfb(self, route: str, duration: float, *, model: str = OTHER_MODEL) -> None:
        """Observe the time to the first byte sent to the client (seconds)."""
        self.ttfb.labels(route=normalize_route(route), model=model).observe(max(duration, 0.0))

    def count_upstream_error(self, kind: str) -> None:
        """Count an upstream failure; ``kind`` from ``UPSTREAM_ERROR_KINDS``."""
        if kind not in UPSTREAM_ERROR_KINDS:
            raise ValueError(f"unknown upstream error kind: {kind!r}")
        self.upstream_errors.labels(kind=kind).inc()

    def count_backend_error(self, component: str) -> None:
        """Count a memory backend failure; ``component`` from ``BACKEND_COMPONENTS``."""
        if component not in BACKEND_COMPONENTS:
            raise ValueError(f"unknown backend component: {component!r}")
        self.backend_errors.labels(component=component).inc()

    def count_dropped(self, reason: str, n: int = 1) -> None:
        """Count recalled memories dropped for ``reason`` (from ``DROP_REASONS``)."""
        if reason not in DROP_REASONS:
            raise ValueError(f"unknown drop reason: {reason!r}")
        if n > 0:
            self.recall_dropped.labels(reason=reason).inc(n)

    def count_tokens(
        self,
        prompt: int | None = None,
        completion: int | None = None,
        injected: int | None = None,
        *,
        model: str = OTHER_MODEL,
    ) -> None:
        """Add a request's token usage (``None`` / negative values are ignored)."""
        for counter, amount in (
            (self.prompt_tokens, prompt),
            (self.completion_tokens, completion),
            (self.injected_tokens, injected),
        ):
            if amount and amount > 0:
                counter.labels(model=model).inc(amount)

    def render(self) -> tuple[bytes, str]:
        """The exposition for ``GET /metrics``: (payload, content type)."""
        if self._multiprocess is not None:
            merged = CollectorRegistry()
            MultiProcessCollector(merged, path=self._multiprocess)
            return generate_latest(merged), CONTENT_TYPE_PLAIN_0_0_4
        return generate_latest(self.registry), CONTENT_TYPE_PLAIN_0_0_4
