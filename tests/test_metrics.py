"""Unit tests for gateway.observability.metrics: names, types, labels and pre-initialisation."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from gateway.observability import metrics as m
from gateway.observability.metrics import Metrics

pytestmark = pytest.mark.unit  # no Redis, servers or browsers

# family name (as the parser reports it: counters without ``_total``) -> (type, label names)
EXPECTED = {
    "memgate_requests": ("counter", {"route", "code", "memory_mode"}),
    "memgate_request_duration_seconds": ("histogram", {"route", "stream"}),
    "memgate_upstream_duration_seconds": ("histogram", {"route", "stream", "model"}),
    "memgate_overhead_duration_seconds": ("histogram", {"route"}),
    "memgate_time_to_first_byte_seconds": ("histogram", {"route", "model"}),
    "memgate_recall_duration_seconds": ("histogram", {"stage"}),
    "memgate_memories_injected": ("histogram", set()),
    "memgate_injected_tokens": ("counter", {"model"}),
    "memgate_prompt_tokens": ("counter", {"model"}),
    "memgate_completion_tokens": ("counter", {"model"}),
    "memgate_recall_dropped": ("counter", {"reason"}),
    "memgate_conflicts": ("counter", set()),
    "memgate_corrections": ("counter", set()),
    "memgate_candidates": ("counter", {"outcome"}),
    "memgate_candidate_decisions": ("counter", {"decision"}),
    "memgate_extractor_fallbacks": ("counter", {"reason"}),
    "memgate_pending_candidates": ("gauge", set()),
    "memgate_memories": ("gauge", {"status"}),
    "memgate_memories_aged": ("gauge", {"after_days"}),
    "memgate_memories_never_injected": ("gauge", {"after_days"}),
    "memgate_upstream_errors": ("counter", {"kind"}),
    "memgate_backend_errors": ("counter", {"component"}),
    "memgate_build_info": ("gauge", {"version"}),
    "memgate_background_failures": ("counter", {"task", "reason"}),
    "memgate_mining_queued": ("counter", set()),
    "memgate_mining_buffered": ("gauge", set()),
    "memgate_recall_over_budget": ("counter", set()),
    "memgate_redis_restarts": ("counter", set()),
}

ATTRIBUTES = {
    "requests": "memgate_requests",
    "request_duration": "memgate_request_duration_seconds",
    "upstream_duration": "memgate_upstream_duration_seconds",
    "overhead_duration": "memgate_overhead_duration_seconds",
    "ttfb": "memgate_time_to_first_byte_seconds",
    "recall_duration": "memgate_recall_duration_seconds",
    "memories_injected": "memgate_memories_injected",
    "injected_tokens": "memgate_injected_tokens",
    "prompt_tokens": "memgate_prompt_tokens",
    "completion_tokens": "memgate_completion_tokens",
    "recall_dropped": "memgate_recall_dropped",
    "conflicts": "memgate_conflicts",
    "corrections": "memgate_corrections",
    "candidates": "memgate_candidates",
    "candidate_decisions": "memgate_candidate_decisions",
    "extractor_fallbacks": "memgate_extractor_fallbacks",
    "pending_candidates": "memgate_pending_candidates",
    "memories": "memgate_memories",
    "memories_aged": "memgate_memories_aged",
    "memories_never_injected": "memgate_memories_never_injected",
    "upstream_errors": "memgate_upstream_errors",
    "backend_errors": "memgate_backend_errors",
    "build_info": "memgate_build_info",
    "background_failures": "memgate_background_failures",
    "mining_queued": "memgate_mining_queued",
    "mining_buffered": "memgate_mining_buffered",
    "recall_over_budget": "memgate_recall_over_budget",
    "redis_restarts": "memgate_redis_restarts",
}

FORBIDDEN_LABELS = re.compile(r"user|tenant|project|session|conversation|memory_id", re.I)


def families(metrics: Metrics) -> dict:
    payload, _ = metrics.render()
    return {f.name: f for f in text_string_to_metric_families(payload.decode())}


def samples(metrics: Metrics, name: str) -> list:
    return [s for f in families(metrics).values() for s in f.samples if s.name == name]


def value(metrics: Metrics, name: str, **labels: str) -> float:
    found = [s.value for s in samples(metrics, name) if s.labels == labels]
    assert len(found) == 1, (name, labels, found)
    return found[0]


@pytest.fixture
def metrics() -> Metrics:
    return Metrics("1.2.3")


def test_render_returns_text_exposition(metrics: Metrics) -> None:
    payload, content_type = metrics.render()
    assert isinstance(payload, bytes)
    assert content_type.startswith("text/plain")
    assert "version=0.0.4" in content_type
    assert b"# TYPE memgate_requests_total counter" in payload


def test_every_expected_metric_has_the_right_type_and_labels(metrics: Metrics) -> None:
    fams = {name: f for name, f in families(metrics).items() if name.startswith("memgate_")}
    assert set(fams) == set(EXPECTED), set(fams) ^ set(EXPECTED)
    for name, (typ, labels) in EXPECTED.items():
        fam = fams[name]
        assert fam.type == typ, name
        assert fam.documentation, name
        for sample in fam.samples:
            assert set(sample.labels) - {"le"} == labels, (name, sample)


def test_attributes_map_to_metric_names(metrics: Metrics) -> None:
    for attr, name in ATTRIBUTES.items():
        assert getattr(metrics, attr)._name == name, attr


def test_standard_process_and_python_collectors_are_exposed(metrics: Metrics) -> None:
    fams = families(metrics)
    for name in ("process_cpu_seconds", "process_resident_memory_bytes", "python_info"):
        assert name in fams, sorted(fams)
    assert fams["process_resident_memory_bytes"].samples[0].value > 0


def test_naming_conventions(metrics: Metrics) -> None:
    payload, _ = metrics.render()
    text = payload.decode()
    types = {
        name: typ
        for name, typ in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
        if not name.startswith(("process_", "python_"))
    }
    assert types
    for name, typ in types.items():
        assert name.startswith("memgate_"), name
        assert not name.startswith("memgate_memgate"), name
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name), name
        if typ == "counter":
            assert name.endswith("_total"), name
        else:
            assert not name.endswith("_total"), name
        if "duration" in name or "latency" in name or name.endswith("_seconds"):
            assert typ == "histogram" and name.endswith("_seconds"), name
        for unit in ("_milliseconds", "_ms", "_minutes", "_bytes_kb"):
            assert unit not in name, name
    # no companion *_created series: they double the series count for nothing
    assert "_created" not in text


def test_no_unbounded_identity_labels(metrics: Metrics) -> None:
    for fam in families(metrics).values():
        for sample in fam.samples:
            for label in sample.labels:
                assert not FORBIDDEN_LABELS.search(label), (fam.name, label)


def test_label_values_are_bounded_and_preinitialised(metrics: Metrics) -> None:
    def label_values(name: str, label: str) -> set[str]:
        return {s.labels[label] for s in samples(metrics, name)}

    assert label_values("memgate_recall_dropped_total", "reason") == set(m.DROP_REASONS)
    assert set(m.DROP_REASONS) == {
        "expired", "scope", "source", "threshold", "superseded",
        "conflict", "sensitivity", "limit", "budget", "paused",
    }  # fmt: skip
    assert label_values("memgate_candidates_total", "outcome") == {
        "queued", "refused_sensitive", "refused_one_time", "refused_inference",
        "duplicate", "rejected_before", "invalid",
    }  # fmt: skip
    assert label_values("memgate_candidate_decisions_total", "decision") == {
        "confirmed", "rejected", "edited",
    }  # fmt: skip
    assert label_values("memgate_extractor_fallbacks_total", "reason") == {
        "unauthorized", "upstream_error", "malformed",
    }  # fmt: skip
    assert label_values("memgate_memories", "status") == {"active", "superseded", "archived"}
    assert label_values("memgate_upstream_errors_total", "kind") == {
        "connect", "timeout", "stream_cut", "http_4xx", "http_5xx",
    }  # fmt: skip
    assert label_values("memgate_backend_errors_total", "component") == {
        "redis", "embedder", "miner",
    }  # fmt: skip
    assert label_values("memgate_recall_duration_seconds_count", "stage") == {
        "embed", "search", "filter", "total",
    }  # fmt: skip
    assert label_values("memgate_request_duration_seconds_count", "route") == {
        "chat", "responses", "passthrough", "memory_api", "admin", "other",
    }  # fmt: skip
    assert label_values("memgate_request_duration_seconds_count", "stream") == {"true", "false"}
    assert label_values("memgate_upstream_duration_seconds_count", "route") >= {
        "chat", "passthrough",
    }  # fmt: skip
    assert label_values("memgate_time_to_first_byte_seconds_count", "route") >= {"chat"}
    # every pre-initialised series starts at zero
    for name in (
        "memgate_recall_dropped_total",
        "memgate_candidates_total",
        "memgate_candidate_decisions_total",
        "memgate_extractor_fallbacks_total",
        "memgate_upstream_errors_total",
        "memgate_backend_errors_total",
        "memgate_memories",
        "memgate_recall_duration_seconds_count",
        "memgate_injected_tokens_total",
        "memgate_prompt_tokens_total",
        "memgate_completion_tokens_total",
        "memgate_conflicts_total",
        "memgate_corrections_total",
        "memgate_pending_candidates",
        "memgate_memories_injected_count",
    ):
        found = samples(metrics, name)
        assert found, name
        assert all(s.value == 0 for s in found), name
    # requests_total has an open-ended code label: no series until the first request
    assert samples(metrics, "memgate_requests_total") == []


def test_build_info(metrics: Metrics) -> None:
    assert value(metrics, "memgate_build_info", version="1.2.3") == 1


def bucket_bounds(metrics: Metrics, name: str, **labels: str) -> list[float]:
    return sorted(
        float(s.labels["le"])
        for s in samples(metrics, name + "_bucket")
        if {k: v for k, v in s.labels.items() if k != "le"} == labels
    )


def test_buckets(metrics: Metrics) -> None:
    for name, labels in (
        ("memgate_request_duration_seconds", {"route": "chat", "stream": "true"}),
        (
            "memgate_upstream_duration_seconds",
            {"route": "chat", "stream": "false", "model": "other"},
        ),
        ("memgate_time_to_first_byte_seconds", {"route": "chat", "model": "other"}),
    ):
        bounds = bucket_bounds(metrics, name, **labels)
        assert bounds[0] <= 0.005 and bounds[-2] >= 600 and bounds[-1] == float("inf"), name
    for name, labels in (
        ("memgate_overhead_duration_seconds", {"route": "chat"}),
        ("memgate_recall_duration_seconds", {"stage": "search"}),
    ):
        bounds = bucket_bounds(metrics, name, **labels)
        assert bounds[0] <= 0.0005 and bounds[-2] >= 2.5, name
        assert len([b for b in bounds if b <= 0.01]) >= 4, name  # fine-grained at the low end
    assert bucket_bounds(metrics, "memgate_memories_injected") == [
        *map(float, range(11)),
        float("inf"),
    ]


def test_separate_registries_do_not_collide() -> None:
    a = Metrics("a")
    b = Metrics("b", registry=CollectorRegistry())
    a.conflicts.inc()
    assert value(a, "memgate_conflicts_total") == 1
    assert value(b, "memgate_conflicts_total") == 0
    assert samples(a, "memgate_build_info")[0].labels == {"version": "a"}
    assert samples(b, "memgate_build_info")[0].labels == {"version": "b"}


def test_explicit_registry_is_used() -> None:
    registry = CollectorRegistry()
    metrics = Metrics("x", registry=registry)
    assert metrics.registry is registry
    assert registry.get_sample_value("memgate_build_info", {"version": "x"}) == 1


def test_observe_request_normalises_labels(metrics: Metrics) -> None:
    metrics.observe_request("chat", 200, "on", 1.5, stream=True)
    metrics.observe_request("chat", "200", "on", 0.5, stream=True)
    metrics.observe_request("/v1/whatever", 404, None, 0.01)
    metrics.observe_request("chat", 9999, "bogus", -1.0)
    assert value(metrics, "memgate_requests_total", route="chat", code="200", memory_mode="on") == 2
    assert (
        value(metrics, "memgate_requests_total", route="other", code="404", memory_mode="none") == 1
    )
    assert (
        value(metrics, "memgate_requests_total", route="chat", code="other", memory_mode="none")
        == 1
    )
    assert (
        value(metrics, "memgate_request_duration_seconds_count", route="chat", stream="true") == 2
    )
    assert (
        value(metrics, "memgate_request_duration_seconds_sum", route="chat", stream="true") == 2.0
    )
    assert value(metrics, "memgate_request_duration_seconds_sum", route="chat", stream="false") == 0


def test_helpers(metrics: Metrics) -> None:
    metrics.observe_upstream("chat", 2.0, stream=False)
    metrics.observe_overhead("chat", 0.003)
    metrics.observe_ttfb("passthrough", 0.2)
    metrics.count_upstream_error("timeout")
    metrics.count_upstream_error(m.upstream_error_kind_for_status(503))
    metrics.count_backend_error("redis")
    metrics.count_dropped("budget", 3)
    metrics.count_dropped("scope", 0)
    metrics.count_tokens(prompt=100, completion=None)
    metrics.count_tokens(prompt=20, completion=7)
    metrics.memories_injected.observe(3)
    assert (
        value(
            metrics,
            "memgate_upstream_duration_seconds_sum",
            route="chat",
            stream="false",
            model="other",
        )
        == 2
    )
    assert value(metrics, "memgate_overhead_duration_seconds_count", route="chat") == 1
    assert (
        value(
            metrics, "memgate_time_to_first_byte_seconds_count", route="passthrough", model="other"
        )
        == 1
    )
    assert value(metrics, "memgate_upstream_errors_total", kind="timeout") == 1
    assert value(metrics, "memgate_upstream_errors_total", kind="http_5xx") == 1
    assert value(metrics, "memgate_backend_errors_total", component="redis") == 1
    assert value(metrics, "memgate_recall_dropped_total", reason="budget") == 3
    assert value(metrics, "memgate_recall_dropped_total", reason="scope") == 0
    assert value(metrics, "memgate_prompt_tokens_total", model="other") == 120
    assert value(metrics, "memgate_completion_tokens_total", model="other") == 7
    assert value(metrics, "memgate_memories_injected_bucket", le="2.0") == 0
    assert value(metrics, "memgate_memories_injected_bucket", le="3.0") == 1
    with pytest.raises(ValueError):
        metrics.count_upstream_error("user_123")
    with pytest.raises(ValueError):
        metrics.count_backend_error("postgres")
    with pytest.raises(ValueError):
        metrics.count_dropped("whim")


def test_model_label_is_bounded_to_accepted_models() -> None:
    metrics = Metrics("x")
    # a name the upstream refused never takes a slot
    assert metrics.model_label("junk-1", accepted=False) == "other"
    assert metrics.model_label("gpt-4o-mini", accepted=True) == "gpt-4o-mini"
    # once accepted, the model keeps its label even on its failures
    assert metrics.model_label("gpt-4o-mini", accepted=False) == "gpt-4o-mini"
    assert metrics.model_label(None, accepted=True) == "other"
    assert metrics.model_label("bad label\n", accepted=True) == "other"
    for i in range(m.MODEL_LABEL_CAP * 3):
        metrics.model_label(f"model-{i}", accepted=True)
    metrics.count_tokens(prompt=1, model=metrics.model_label("gpt-4o-mini", accepted=True))
    labels = {s.labels["model"] for s in samples(metrics, "memgate_prompt_tokens_total")}
    assert "gpt-4o-mini" in labels
    assert metrics.model_label("model-999", accepted=True) == "other"
    assert len(metrics._seen_models) == m.MODEL_LABEL_CAP


def test_model_allow_list() -> None:
    metrics = Metrics("x", models=["gpt-4o", "o3"])
    assert metrics.model_label("gpt-4o", accepted=False) == "gpt-4o"
    assert metrics.model_label("gpt-4o-mini", accepted=True) == "other"


@pytest.mark.parametrize(
    ("fn", "arg", "expected"),
    [
        (m.normalize_route, "chat", "chat"),
        (m.normalize_route, "admin", "admin"),
        (m.normalize_route, None, "other"),
        (m.normalize_route, "tenant-42", "other"),
        (m.normalize_memory_mode, "dry-run", "dry-run"),
        (m.normalize_memory_mode, "DRY", "none"),
        (m.normalize_code, 502, "502"),
        (m.normalize_code, "abc", "other"),
        (m.stream_label, True, "true"),
        (m.stream_label, False, "false"),
        (m.stream_label, "TRUE", "true"),
        (m.upstream_error_kind_for_status, 429, "http_4xx"),
        (m.upstream_error_kind_for_status, 500, "http_5xx"),
    ],
)
def test_normalisers(fn, arg, expected) -> None:
    assert fn(arg) == expected
