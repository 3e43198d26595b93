"""``memgate bench recall`` and ``memgate bench locomo`` run end to end on tiny inputs.

Each run starts its own embedded Redis in a temporary directory. The LoCoMo run uses a small
LoCoMo-shaped fixture written here, never the shared data set. No timing assertions: speed is read
from the printed figures, never asserted in tests.
"""

from __future__ import annotations

import gc
import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks import bench_recall
from gateway.cli import main
from gateway.memory.policy import load_policy
from gateway.memory.records import Memory
from gateway.storage.store import Hit

NUMBER = r"\d+\.\d\d"
RATE = r"(\d\.\d{3}|-)"


def _turn(dia: str, speaker: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia, "text": text}


LOCOMO = [
    {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Anna",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                _turn("D1:1", "Anna", "Hi Ben! I just adopted a corgi puppy called Biscuit."),
                _turn("D1:2", "Ben", "Congrats! I spent the weekend repairing my old sailboat."),
                _turn("D1:3", "Anna", "I also started pottery classes on Thursday evenings."),
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [
                _turn("D2:1", "Ben", "My sister moved to Lisbon to work as an architect."),
                _turn("D2:2", "Anna", "Biscuit chewed my favourite running shoes yesterday."),
                _turn("D2:3", "Ben", "I am training for the Berlin marathon in September."),
            ],
            "session_3_date_time": "7:30 pm on 2 June, 2023",
            "session_3": [
                _turn("D3:1", "Anna", "I finished my first pottery bowl, a blue glazed one."),
                _turn("D3:2", "Ben", "The sailboat is finally back on the water."),
            ],
        },
        "qa": [
            {
                "question": "What is the name of Anna's corgi?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "When does Anna take pottery classes?",
                "answer": "Thursday evenings",
                "evidence": ["D1:3"],
                "category": 2,
            },
            {
                "question": "Where did Ben's sister move?",
                "answer": "Lisbon",
                "evidence": ["D2:1"],
                "category": 4,
            },
            {
                "question": "What did Anna make in pottery and what did her dog chew?",
                "answer": "a blue bowl; running shoes",
                "evidence": ["D3:1; D2:2"],
                "category": 1,
            },
            {
                "question": "Which marathon is Ben training for?",
                "answer": "Berlin",
                "evidence": ["D2:3", "D9:9"],
                "category": 3,
            },
            {"question": "What did Ben repair?", "answer": "", "evidence": [], "category": 4},
            {
                "question": "What is Ben's cat called?",
                "adversarial_answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 5,
            },
        ],
    },
    {
        "sample_id": "conv-2",
        "conversation": {
            "speaker_a": "Chen",
            "speaker_b": "Dana",
            "session_1_date_time": "9:15 am on 1 March, 2023",
            "session_1": [
                _turn("D1:1", "Chen", "I grow tomatoes and basil on my balcony."),
                _turn("D1:2", "Dana", "I am learning Japanese for a trip to Osaka."),
            ],
            "session_2_date_time": "6:00 pm on 15 March, 2023",
            "session_2": [
                _turn("D2:1", "Chen", "The basil died but the tomatoes are doing great."),
                _turn("D2:2", "Dana", "I booked a ryokan in Osaka for April."),
            ],
        },
        "qa": [
            {
                "question": "What language is Dana learning?",
                "answer": "Japanese",
                "evidence": ["D1:2"],
                "category": 4,
            },
            {
                "question": "Where is Dana staying in Osaka?",
                "answer": "a ryokan",
                "evidence": ["D2:2"],
                "category": 4,
            },
        ],
    },
]

PREFEVAL = {
    "travel_hotel": [
        {
            "preference": "I avoid hotels with a bustling nightlife atmosphere.",
            "question": "Can you suggest hotels for my trip to Las Vegas?",
        },
        {
            "preference": "I always want a hotel with a gym.",
            "question": "Where should I stay in Chicago for a week?",
        },
    ],
    "lifestyle_dietary": [
        {
            "preference": "I am vegan and never eat animal products.",
            "question": "What should I cook for a dinner party?",
        },
        {"preference": "I dislike spicy food.", "question": "Which Sichuan dishes should I try?"},
    ],
}


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    """The eval-data layout: <root>/locomo/locomo10.json and <root>/prefeval/explicit_preference."""
    path = tmp_path / "eval-data" / "locomo" / "locomo10.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(LOCOMO), encoding="utf-8")
    prefs = tmp_path / "eval-data" / "prefeval" / "explicit_preference"
    prefs.mkdir(parents=True)
    for topic, rows in PREFEVAL.items():
        (prefs / f"{topic}.json").write_text(json.dumps(rows), encoding="utf-8")
    return path


def _rates(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?<![\d.])\d\.\d{3}(?![\d.])", line)]


def test_bench_recall_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    frozen = gc.get_freeze_count()
    code = main(["bench", "recall", "--sizes", "100,200", "--queries", "10", "--warmup", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    # the heap is frozen only while recalls are timed (as a server's after start-up)
    assert "heap frozen before timing" in out
    assert gc.get_freeze_count() == frozen
    assert "memgate bench recall" in out
    for size in ("100", "200"):
        assert re.search(rf"^\s+{size}\s+embed\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$", out, re.M), out
    for stage in ("search", "filter", "total"):
        assert len(re.findall(rf"^\s+{stage}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$", out, re.M)) == 2
    assert re.search(rf"^\s+100 -> 200\s+2x\s+{NUMBER}x\s+{NUMBER}x\s+", out, re.M), out
    assert re.search(
        rf"^\s+recall_candidates: KNN \+ BM25 gathered(\s+{NUMBER}){{4}}$", out, re.M
    ), out
    assert "settings HGETALL" in out and "HYBRID_POLICY ADHOC_BF" in out
    assert re.search(r"^verdict: no 10,000-memory run", out, re.M), out


def test_bench_locomo_on_a_fixture(locomo_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "locomo", "--data", str(locomo_file), "--k", "2", "--pool", "10"])
    out = capsys.readouterr().out
    assert code == 0, out
    # 7 category 1-4 questions with usable evidence: the empty one and category 5 are skipped.
    assert "with evidence: 7 (1 without usable evidence skipped, 1 evidence ids" in out
    assert "Evidence recall@2 (any gold turn in the top 2):" in out
    assert "Evidence recall@4:" in out
    assert re.search(r"^\s+questions\s+1\s+1\s+1\s+4\s+7$", out, re.M), out
    rows = (
        "vector-only (1/0)",
        "text-only (0/1)",
        "hybrid, policy (0.8/0.2)",
        "hybrid 0.75/0.25",
        "hybrid 0.5/0.5",
        "RRF 1:1 (k=60)",
        "hybrid 0.75/0.25, BM25/max",
        "recaller end to end (pool 12, <= 6 injected)",
    )
    for name in rows:
        lines = [line for line in out.splitlines() if line.strip().startswith(name + " ")]
        assert len(lines) >= 2, (name, out)  # in both tables (and PrefEval for most)
        for line in lines:
            rates = _rates(line)
            assert rates and all(0.0 <= r <= 1.0 for r in rates), line
    assert "PrefEval explicit preferences: 4 preferences from 2 topics" in out
    pref = out.split("PrefEval explicit preferences")[1]
    assert re.search(rf"^\s+vector-only \(1/0\)\s+{RATE}\s+{RATE}$", pref, re.M), pref
    verdict = re.search(
        r"^verdict: LoCoMo R@2: hybrid \(policy 0.8/0.2\) (\S+) \(\d+/7\) vs "
        r"vector-only (\S+) \(\d+/7\), text-only (\S+) \(\d+/7\): ",
        out,
        re.M,
    )
    assert verdict, out
    assert all(0.0 <= float(x) <= 1.0 for x in verdict.groups())
    assert str(locomo_file.parent) not in out  # no machine-specific paths in the report


def test_bench_locomo_without_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "locomo", "--data", str(tmp_path / "absent.json")]) == 2
    out = capsys.readouterr().out
    assert "LoCoMo data not found" in out and "--data" in out


def test_locomo_loading_normalises_evidence(locomo_file: Path) -> None:
    data = bench_recall.load_locomo(locomo_file)
    assert {u: len(t) for u, t in data.turns.items()} == {"conv-1": 8, "conv-2": 4}
    assert data.turns["conv-1"][0].text.startswith("Anna: Hi Ben!")
    assert data.turns["conv-1"][0].when is not None
    gold = {q.text: q.gold for q in data.questions}
    assert gold["What did Anna make in pottery and what did her dog chew?"] == {"D3:1", "D2:2"}
    assert gold["Which marathon is Ben training for?"] == {"D2:3"}  # D9:9 does not exist
    assert data.skipped_empty == 1 and data.dropped_ids == 1
    assert all(q.category in (1, 2, 3, 4) for q in data.questions)


def _hit(memory_id: str, vector: float, text: float) -> Hit:
    memory = Memory(
        id=memory_id, tenant="t", user="u", content="x", type="preference", source="user_stated"
    )
    return Hit(memory, vector=vector, text=text)


def test_one_sided_rankings_use_only_their_own_hits() -> None:
    hits = [_hit("knn", 0.9, 0.0), _hit("both", 0.5, 3.0), _hit("bm25", 0.0, 9.0)]
    policy = load_policy()
    text_only = bench_recall.fused_ranker(policy, 0.0, 1.0)
    vector_only = bench_recall.fused_ranker(policy, 1.0, 0.0)
    assert text_only(hits) == ["bm25", "both"]
    assert vector_only(hits) == ["knn", "both"]
    assert bench_recall.rrf_rank(hits)[0] == "both"  # ranked in both lists
    assert bench_recall.max_normalised_ranker(0.0, 1.0)(hits)[:2] == ["bm25", "both"]


def test_synthetic_memories_are_distinct_and_bilingual() -> None:
    rows = bench_recall._distinct(bench_recall.MEMORY_TEMPLATES, 3000, np.random.default_rng(0))
    texts = [text for _, text in rows]
    assert len(set(texts)) == 3000
    assert any(re.search(r"[\u4e00-\u9fff]", t) for t in texts)
    assert any(t.isascii() for t in texts)
    queries = bench_recall.sample_queries(50)
    assert len(set(queries)) == 50


def test_bench_arguments_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "recall", "--sizes", "ten"])
    with pytest.raises(SystemExit):
        main(["bench", "recall", "--rounds", "3"])  # a proxy option
    assert bench_recall.run_recall_bench(sizes=[5]) == 2
    assert bench_recall.run_locomo_bench(k=5, pool=5) == 2
