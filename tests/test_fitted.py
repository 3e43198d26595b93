"""The fitted relevance (``gateway.memory.fitted``, ``recall.relevance.fitted``): how likely a
request needs a topical memory, by weights a dimension of the embedder's vectors (their
products, and each vector alone) fitted to written scenarios; fitted deterministically, read
only for the embedder it was fitted with, applied in recall and traced, and written as a
policy layer by ``memgate fit relevance``."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from gateway.memory.embed import LocalEmbedder
from gateway.memory.fitted import FittedRelevance, fit
from gateway.memory.identity import Identity
from gateway.memory.memories import Memories
from gateway.memory.policy import FittedRelevanceSpec, Policy, PolicyError, load_policy
from gateway.memory.recall import Recaller

pytestmark = pytest.mark.anyio


class _Named:
    """An embedder as FittedRelevance sees it: a model name and a width."""

    def __init__(self, model_id: str, dims: int | None) -> None:
        self.model_id = model_id
        self.dims = dims


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _auc(scores: np.ndarray, needed: np.ndarray) -> float:
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(len(scores))
    pos = needed.astype(bool)
    return float((ranks[pos].sum() - pos.sum() * (pos.sum() - 1) / 2) / (pos.sum() * (~pos).sum()))


def test_the_fit_learns_which_dimensions_say_a_memory_is_needed() -> None:
    """Pairs whose need shows in two dimensions of eight, not in the whole cosine: the fitted
    weights rank the needed above the rest far better than the cosine does, and the same
    pairs always give the same weights (without directions across dimensions, which would
    share the load: their own test follows)."""
    rng = np.random.default_rng(7)
    queries = _unit(rng.normal(size=(600, 8)))
    memories = _unit(rng.normal(size=(600, 8)))
    signal = queries[:, 0] * memories[:, 0] + queries[:, 1] * memories[:, 1]
    needed = signal > 0.05
    fitted = fit(queries, memories, needed, rank=0)
    assert (fitted.pairs, fitted.needed) == (600, int(needed.sum()))
    weights = np.asarray(fitted.weights)
    learned = (queries * memories) @ weights + fitted.bias
    cosine = (queries * memories).sum(axis=1)
    assert _auc(learned, needed) > 0.95 > _auc(cosine, needed) + 0.1
    assert weights[:2].min() > np.abs(weights[2:]).max()
    assert fit(queries, memories, needed, rank=0) == fitted


def test_the_fit_learns_kinds_of_memory_and_request_that_matter_alone() -> None:
    """Pairs where a kind of memory (one direction of eight) is needed by every request, and
    a kind of request needs every memory, whatever the two share: the weights of either
    vector alone carry it, which no weight of their products can; the product weights keep
    what they learn beside them."""
    rng = np.random.default_rng(11)
    queries = _unit(rng.normal(size=(800, 8)))
    memories = _unit(rng.normal(size=(800, 8)))
    signal = queries[:, 0] * memories[:, 0] + 0.5 * memories[:, 1] + 0.5 * queries[:, 2]
    needed = signal > 0.1
    fitted = fit(queries, memories, needed, rank=0)
    assert len(fitted.memory_weights) == len(fitted.request_weights) == 8
    memory, request = np.asarray(fitted.memory_weights), np.asarray(fitted.request_weights)
    assert memory[1] > 5 * np.abs(np.delete(memory, 1)).max()
    assert request[2] > 5 * np.abs(np.delete(request, 2)).max()
    products = (queries * memories) @ np.asarray(fitted.weights) + fitted.bias
    learned = products + memories @ memory + queries @ request
    assert _auc(learned, needed) > 0.97 > _auc(products, needed) + 0.1
    # calibrated: as likely on the whole as the pairs are needed (the bias is fitted too)
    likely = 1 / (1 + np.exp(-learned))
    assert abs(likely.mean() - needed.mean()) < 0.02
    # what the shrink is for: unheld, the weights of a vector alone grow larger; it holds
    # only them, so a large one takes them to about 0 and leaves the product weights as free
    loose = fit(queries, memories, needed, shrink=0.0, rank=0)
    assert np.abs(loose.memory_weights).sum() > np.abs(memory).sum()
    held = fit(queries, memories, needed, shrink=10.0, rank=0)
    assert np.abs([*held.memory_weights, *held.request_weights]).max() < 0.1
    assert held.weights[0] > 5.0 > 3 * np.abs(held.weights[1:]).max()


def _pairwise(spec: FittedRelevanceSpec, queries: np.ndarray, memories: np.ndarray) -> np.ndarray:
    """The likelihood the spec gives each request of its own memory (row i with row i)."""
    relevance = FittedRelevance(spec, _Named(spec.embedder, queries.shape[1]))  # type: ignore[arg-type]
    rows = [relevance.likelihoods(q, m[None, :]) for q, m in zip(queries, memories, strict=True)]
    assert all(r is not None for r in rows)
    return np.array([float(r[0]) for r in rows if r is not None])


def test_the_fit_learns_what_one_dimension_of_the_request_calls_for_in_another() -> None:
    """Pairs whose need is a direction of the request meeting another direction of the
    memory (a week to plan and a night shift are not alike in any one dimension): no weight
    a dimension, of their products or of either vector alone, can carry it; the directions
    of rank ``k`` do, and the likelihood the spec reads is the one fitted."""
    rng = np.random.default_rng(5)
    queries = _unit(rng.normal(size=(800, 8)))
    memories = _unit(rng.normal(size=(800, 8)))
    needed = queries[:, 0] * memories[:, 1] > 0.05
    flat = fit(queries, memories, needed, rank=0)
    assert flat.request_factors == flat.memory_factors == ()
    flat_fit = FittedRelevanceSpec(embedder="usem3q8", **flat.layer_fields())
    assert _auc(_pairwise(flat_fit, queries, memories), needed) < 0.75
    fitted = fit(queries, memories, needed, rank=2)
    assert len(fitted.request_factors) == len(fitted.memory_factors) == 2
    spec = FittedRelevanceSpec(embedder="usem3q8", **fitted.layer_fields())
    likely = _pairwise(spec, queries, memories)
    flat_spec = spec.model_copy(update={"request_factors": (), "memory_factors": ()})
    without = _pairwise(flat_spec, queries, memories)
    assert _auc(likely, needed) > 0.97
    assert _auc(without, needed) < 0.75
    assert fit(queries, memories, needed, rank=2) == fitted
    with pytest.raises(ValueError, match="rank"):
        fit(queries, memories, needed, rank=-1)


def test_the_fit_needs_pairs_of_both_kinds() -> None:
    rows = _unit(np.ones((3, 4)))
    with pytest.raises(ValueError, match="both kinds"):
        fit(rows, rows, [True, True, True])
    with pytest.raises(ValueError, match="one request and one memory"):
        fit(rows, rows, [True, False])


def test_weights_are_read_only_for_the_embedder_they_were_fitted_with() -> None:
    spec = FittedRelevanceSpec(embedder="usem3q8", weights=(2.0, 0.0, 0.0, 0.0), bias=-1.0)
    assert FittedRelevance(spec, _Named("usem3q8", 4)).enabled  # type: ignore[arg-type]
    assert FittedRelevance(spec, _Named("usem3q8", None)).enabled  # type: ignore[arg-type]
    assert not FittedRelevance(spec, _Named("text-embedding-3-small", 4)).enabled  # type: ignore[arg-type]
    assert not FittedRelevance(spec, _Named("usem3q8", 512)).enabled  # type: ignore[arg-type]
    assert not FittedRelevance(FittedRelevanceSpec(), _Named("usem3q8", 4)).enabled  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        FittedRelevance(FittedRelevanceSpec(), _Named("usem3q8", 4)).likelihoods(  # type: ignore[arg-type]
            np.ones(4), np.ones((1, 4))
        )
    on = FittedRelevance(spec, _Named("usem3q8", 4))  # type: ignore[arg-type]
    query = np.array([1.0, 0.0, 0.0, 0.0])
    rows = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    # sigmoid(2 * 1 - 1) and sigmoid(0 - 1)
    assert np.allclose(on.likelihoods(query, rows), [1 / (1 + np.exp(-1)), 1 / (1 + np.exp(1))])  # type: ignore[arg-type]
    # an embedder whose width was not known up front: vectors of another width are not read
    unknown = FittedRelevance(spec, _Named("usem3q8", None))  # type: ignore[arg-type]
    assert unknown.likelihoods(np.ones(3), np.ones((2, 3))) is None
    # weights far past what exp() takes: 0 or 1, no overflow (warnings are errors here)
    huge = FittedRelevanceSpec(embedder="usem3q8", weights=(1e6, 0.0, 0.0, 0.0))
    far = FittedRelevance(huge, _Named("usem3q8", 4)).likelihoods(query, np.vstack([rows, -rows]))  # type: ignore[arg-type]
    assert far is not None and np.allclose(far, [1.0, 0.5, 0.0, 0.5])
    # the memory's and the request's vectors alone add their own terms
    alone = spec.model_copy(
        update={"memory_weights": (0.0, 3.0, 0.0, 0.0), "request_weights": (0.5, 0.0, 0.0, 0.0)}
    )
    both = FittedRelevance(alone, _Named("usem3q8", 4)).likelihoods(query, rows)  # type: ignore[arg-type]
    # sigmoid(2 + 0 + 0.5 - 1) and sigmoid(0 + 3 + 0.5 - 1)
    assert both is not None and np.allclose(both, 1 / (1 + np.exp([-1.5, -2.5])))
    # a direction of the request met by another of the memory: (Uq) . (Vm) = 1 * 2 for the
    # second row, nothing for the first
    crossed = alone.model_copy(
        update={
            "request_factors": ((1.0, 0.0, 0.0, 0.0),),
            "memory_factors": ((0.0, 2.0, 0.0, 0.0),),
        }
    )
    across = FittedRelevance(crossed, _Named("usem3q8", 4)).likelihoods(query, rows)  # type: ignore[arg-type]
    assert across is not None and np.allclose(across, 1 / (1 + np.exp([-1.5, -4.5])))


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"add_at": 0.2, "drop_below": 0.3}, "drop_below must be below add_at"),
        ({"drop_below": 0.1, "drop_shared_below": 0.2}, "not be above drop_below"),
        ({"drop_shared_below": -0.1}, "greater than or equal to 0"),
        ({"weights": (1.0, 2.0)}, "need the embedder"),
        ({"embedder": "usem3q8", "weights": (1.0, float("nan"))}, "finite"),
        ({"embedder": "usem3q8", "weights": (1.0, 2.0), "memory_weights": (1.0,)}, "memory_"),
        ({"embedder": "usem3q8", "weights": (1.0,), "request_weights": (1.0, 2.0)}, "request_"),
        ({"embedder": "usem3q8", "weights": (1.0,), "memory_weights": (float("inf"),)}, "finite"),
        ({"add_at": 0.0}, "greater than 0"),
        (
            {"embedder": "usem3q8", "weights": (1.0,), "request_factors": ((1.0,),)},
            "as many rows",
        ),
        (
            {
                "embedder": "usem3q8",
                "weights": (1.0, 2.0),
                "request_factors": ((1.0,),),
                "memory_factors": ((1.0, 0.0),),
            },
            "one value a dimension",
        ),
        ({"request_factors": ((1.0,),), "memory_factors": ((1.0,),)}, "need the weights"),
        (
            {
                "embedder": "usem3q8",
                "weights": (1.0,),
                "request_factors": ((float("nan"),),),
                "memory_factors": ((1.0,),),
            },
            "finite",
        ),
    ],
)
def test_a_fitted_relevance_that_cannot_be_read_is_refused(
    fields: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem):
        FittedRelevanceSpec(**fields)  # type: ignore[arg-type]


def test_the_shipped_weights_are_for_the_local_embedder(shipped_policy: Policy) -> None:
    fitted = shipped_policy.recall.relevance.fitted
    embedder = LocalEmbedder()
    assert fitted.embedder == embedder.model_id and len(fitted.weights) == embedder.dims
    assert len(fitted.memory_weights) == len(fitted.request_weights) == embedder.dims
    assert len(fitted.request_factors) == len(fitted.memory_factors) > 0
    assert {len(row) for row in (*fitted.request_factors, *fitted.memory_factors)} == {512}
    assert FittedRelevance(fitted, embedder).enabled


def test_a_layer_with_a_fit_of_its_own_replaces_the_shipped_fit_whole(tmp_path: Path) -> None:
    """A layer that sets the fit's weights, embedder or bias (one written by an earlier form
    of `memgate fit relevance`, products only) takes none of the shipped fit's other
    weights: a model neither fitted is never made of two. A layer setting only a bar keeps
    the shipped fit, and a bar for memories about other topics below ``add_at`` loads."""
    layer = tmp_path / "layer.yaml"
    layer.write_text(
        "recall:\n  relevance:\n    fitted:\n      embedder: usem3q8\n      bias: -1.0\n"
        f"      weights: {[1.0] * 512}\n",
        encoding="utf-8",
    )
    own = load_policy(layer).recall.relevance.fitted
    assert own.weights == (1.0,) * 512 and own.bias == -1.0
    assert own.memory_weights == () and own.request_weights == ()
    assert own.request_factors == own.memory_factors == ()
    layer.write_text("recall:\n  relevance:\n    fitted:\n      weights: []\n", encoding="utf-8")
    off = load_policy(layer).recall.relevance.fitted
    assert off.weights == off.memory_weights == off.request_weights == ()
    assert not FittedRelevance(off, LocalEmbedder()).enabled
    # ... and one setting some of the fit's keys but not its weights is refused: the fit it
    # replaces whole would be turned off unasked (a layer meaning to drop the directions)
    layer.write_text(
        "recall:\n  relevance:\n    fitted:\n      request_factors: []\n      memory_factors: []\n",
        encoding="utf-8",
    )
    with pytest.raises(PolicyError, match=r"fitted\.memory_factors: a fit's keys are replaced"):
        load_policy(layer)
    layer.write_text("recall:\n  relevance:\n    fitted:\n      add_at: 0.8\n", encoding="utf-8")
    bars = load_policy(layer).recall.relevance.fitted
    assert bars.add_at == 0.8 and bars.add_off_topic_at is not None
    assert bars.add_off_topic_at < bars.add_at and len(bars.memory_weights) == 512


def _with_fitted(policy: Policy, fitted: FittedRelevanceSpec) -> Policy:
    relevance = policy.recall.relevance.model_copy(update={"fitted": fitted})
    recall = policy.recall.model_copy(update={"relevance": relevance})
    return policy.model_copy(update={"recall": recall})


async def test_recall_reads_the_likelihood_where_the_users_life_may_be_linked(
    service: Memories, shipped_policy: Policy
) -> None:
    """A memory the fitted relevance makes likely needed reaches a request that shares
    nothing with it, and its trace says how likely; in a project it does not, and with
    weights for another embedder nothing is worked out."""
    sure = shipped_policy.recall.relevance.fitted.model_copy(
        update={"weights": (40.0,) * 512, "bias": 10.0, "embedder": service.embedder.model_id}
    )
    policy = _with_fitted(shipped_policy, sure)
    ident = Identity(f"fit{time.time_ns()}", "ann", None, "on", "tr_fit")
    sweets = (await service.create(ident, content="I hate licorice", type="preference")).memory
    question = "Which laptop is good for editing 4K video?"
    shipped = await Recaller(service.store, service.embedder, shipped_policy, service.clock).recall(
        ident, question
    )
    assert sweets.id not in [m.id for m in shipped.injected]
    result = await Recaller(service.store, service.embedder, policy, service.clock).recall(
        ident, question
    )
    assert [m.id for m in result.injected] == [sweets.id]
    [cand] = result.candidates
    assert cand.fitted is not None and cand.fitted > 0.99 and cand.reason is None
    assert cand.to_trace()["fitted"] == round(cand.fitted, 4)
    in_code = Identity(ident.tenant, "ann", "cutter", "on", "tr_fit2")
    coded = await Recaller(service.store, service.embedder, policy, service.clock).recall(
        in_code, question
    )
    assert coded.injected == []
    other = _with_fitted(policy, sure.model_copy(update={"embedder": "another-model"}))
    off = await Recaller(service.store, service.embedder, other, service.clock).recall(
        ident, question
    )
    assert [c.fitted for c in off.candidates] == [None]


def _fit(scenarios: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "fit",
            "relevance",
            str(scenarios),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.long
def test_memgate_fit_relevance_writes_a_policy_layer(tmp_path: Path) -> None:
    scenarios = tmp_path / "fit.yaml"
    scenarios.write_text(
        """scenarios:
  - id: fit-knee
    category: topical
    memories:
      - {ref: knee, content: "My left knee is bad on stairs", type: profile, age_days: 30}
      - {ref: band, content: "I play bass in a covers band", type: profile, age_days: 60}
    request: {message: "Plan three days of walking around Lisbon for me"}
    expect: [knee]
    forbid: [band]
  - id: fit-nuts
    category: topical
    memories:
      - {ref: nuts, content: "我对花生过敏", type: profile, age_days: 10}
      - {ref: chess, content: "我周末下围棋", type: profile, age_days: 90}
    request: {message: "帮我想想周六聚餐做什么菜"}
    expect: [nuts]
    forbid: [chess]
""",
        encoding="utf-8",
    )
    out = tmp_path / "fitted.yaml"
    done = _fit(scenarios, out)
    assert done.returncode == 0, done.stderr
    assert "2 scenarios, 4 pairs (2 needed)" in done.stdout
    fitted = load_policy(out).recall.relevance.fitted
    assert fitted.embedder == "usem3q8" and len(fitted.weights) == 512
    assert len(fitted.memory_weights) == len(fitted.request_weights) == 512
    assert len(fitted.request_factors) == len(fitted.memory_factors) == 8
    # only needed memories: nothing to tell them from
    scenarios.write_text(
        scenarios.read_text(encoding="utf-8")
        .replace("    forbid: [band]\n", "")
        .replace("    forbid: [chess]\n", ""),
        encoding="utf-8",
    )
    refused = _fit(scenarios, out)
    assert refused.returncode == 2 and "both kinds" in refused.stderr
