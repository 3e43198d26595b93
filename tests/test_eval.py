"""`memgate eval`: the scenario format, simulated time behind the admin token, the three arms."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from gateway.cli import main
from gateway.memory.eval import ArmResult, EvalRunner, encode_answers, recorded_answer, stub_app
from gateway.memory.eval_scenarios import (
    SHIPPED_EVAL,
    AnswerChecks,
    EvalScenario,
    answer_language,
    check_answer,
    load_eval_scenarios,
)
from gateway.memory.scenario_eval import SHIPPED, ScenarioError, load_scenarios
from gateway.storage.redis_server import free_port
from tests.conftest import Gateway, GatewayFactory
from tests.upstream_stub import ServerThread

ADMIN = "test-admin-token"

# --- the format ------------------------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(ScenarioError) as caught:
        load_eval_scenarios(path)
    return str(caught.value)


def test_validation_errors_name_the_file_the_scenario_and_the_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
scenarios:
  - id: good-one
    category: x
    memories: [{ref: a, content: "Always answer in English", type: preference}]
    turns: [{message: hi, expect: [a]}]
  - id: bad-language
    category: x
    turns:
      - {message: hi}
      - {message: again, answer: {language: fr}}
""",
    )
    message = _error(path)
    assert str(path) in message
    assert "scenario bad-language" in message
    assert "turns.1.answer.language" in message

    path = _write(
        tmp_path,
        """
scenarios:
  - id: refs
    category: x
    memories: [{ref: a, content: "c", type: preference}]
    wrong: [{ref: w, content: "d", type: preference, kind: guessed}]
    turns:
      - {message: one, at_day: 3}
      - {message: two, at_day: 1, forbid: [nope]}
""",
    )
    message = _error(path)
    assert f"{path}: scenario refs: wrong.0.kind:" in message

    path = _write(
        tmp_path,
        """
scenarios:
  - id: refs
    category: x
    memories: [{ref: a, content: "c", type: preference}]
    turns:
      - {message: one, at_day: 3, correction: {message: "no", if_injected: [zz]}}
      - {message: two, at_day: 1, forbid: [nope]}
""",
    )
    message = _error(path)
    assert f"{path}: scenario refs: turns.1.at_day: earlier than the turn before it" in message
    assert f"{path}: scenario refs: turns.1.forbid: unknown memory 'nope'" in message
    assert f"{path}: scenario refs: turns.0.correction.if_injected: unknown 'zz'" in message

    path = _write(tmp_path, "scenarios:\n  - {id: empty, category: x}\n")
    assert "scenario empty" in _error(path) and "needs turns" in _error(path)


def test_the_recall_format_still_loads_and_runs_as_one_turn_scenarios() -> None:
    recall = load_scenarios(SHIPPED)
    as_eval = load_eval_scenarios(SHIPPED)
    assert [s.id for s in as_eval] == [s.id for s in recall]
    first = as_eval[0].all_turns()
    assert len(first) == 1
    assert first[0].message == recall[0].request.message
    assert first[0].expect == recall[0].expect


def test_the_shipped_pack_is_bilingual_and_covers_each_failure() -> None:
    pack = load_eval_scenarios(SHIPPED_EVAL)
    kinds = {w.kind for s in pack for w in s.wrong}
    assert {"stale", "out_of_scope", "inferred", "one_time"} <= kinds
    said = [w.said for s in pack for w in s.wrong if w.said]
    assert "这次简短一点" in said
    contents = [w.content for s in pack for w in s.wrong]
    assert "用户是编程初学者" in contents
    languages = {answer_language(t.message) for s in pack for t in s.all_turns()}
    assert languages == {"zh", "en"}
    assert any(t.correction for s in pack for t in s.all_turns())


# --- answer checks on recorded answers ---------------------------------------------------------


def test_answer_checks() -> None:
    def passed(text: str, **checks: object) -> bool:
        return all(r.passed for r in check_answer(text, AnswerChecks.model_validate(checks)))

    assert passed("哈希表通过哈希函数定位 key", language="zh")
    assert not passed("A hash table maps keys to values.", language="zh")
    assert passed("About 650 km by road.", units="metric")
    assert not passed("About 400 miles (650 km).", units="metric")
    assert passed("It is 400 miles.", units="imperial")
    assert passed("Pros:\n- a\n- b", bullets=True, no_emoji=True)
    assert not passed("Nice 🚀 and flexible", no_emoji=True)
    assert not passed("one line only", bullets=True)
    assert passed("Use FastAPI here", mentions=["Django", "fastapi"], must_not_contain=["Flask"])
    assert not passed("In Flask, abort(404)", must_not_contain=["flask"])
    assert passed("SYN, SYN-ACK, ACK", contains=["SYN-ACK", "ACK"])


def _turn(scenario_id: str, index: int) -> tuple[EvalScenario, int]:
    scenario = next(s for s in load_eval_scenarios(SHIPPED_EVAL) if s.id == scenario_id)
    return scenario, index


def test_recorded_answers_are_checked_offline() -> None:
    scenario, i = _turn("metric-units", 0)
    turn = scenario.all_turns()[i]
    assert turn.answer is not None
    results = {arm: check_answer(text, turn.answer) for arm, text in turn.answers.items()}
    assert all(r.passed for r in results["memory"])
    assert not all(r.passed for r in results["off"])
    scenario, i = _turn("work-template-leaks", 0)
    turn = scenario.all_turns()[i]
    assert turn.answer is not None
    leaked = check_answer(turn.if_injected["tmpl-everywhere"], turn.answer)
    assert [r.name for r in leaked if not r.passed] == [
        "must not contain '本周进展'",
        "must not contain '下周计划'",
    ]


def test_the_offline_upstream_answers_by_what_was_forwarded() -> None:
    header = encode_answers("plain answer", [("回答尽量简短", "short answer")])
    system = {"role": "system", "content": "<preferences>\n- 回答尽量简短\n</preferences>"}
    user = {"role": "user", "content": "hi"}
    assert recorded_answer(header, [system, user]) == "short answer"
    assert recorded_answer(header, [user]) == "plain answer"
    assert recorded_answer(encode_answers(None, []), [user]) is None
    assert recorded_answer(None, [user]) is None


# --- simulated time belongs to the admin token -----------------------------------------------


def test_the_clock_moves_only_for_the_admin_token(gateway: Gateway) -> None:
    past = "2020-02-03T04:05:06Z"
    user_headers = {"Authorization": "Bearer sk-ordinary-caller", "X-Memory-User": "clock-u"}
    with httpx.Client(base_url=gateway.url, timeout=30.0) as client:
        # an ordinary caller: refused, on the memory API and on chat
        resp = client.post(
            "/v1/memories",
            json={"content": "I like tea", "type": "preference"},
            headers={**user_headers, "X-Memory-Eval-Time": past},
        )
        assert resp.status_code == 400, resp.text
        error = resp.json()["error"]
        assert (error["code"], error["param"]) == ("invalid_header", "x-memory-eval-time")
        resp = client.post(
            "/v1/chat/completions",
            json={"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]},
            headers={**user_headers, "X-Memory-Eval-Time": past},
        )
        assert resp.status_code == 400, resp.text
        # without the header the same caller's memory is saved now, not in the past
        resp = client.post(
            "/v1/memories",
            json={"content": "I like tea", "type": "preference"},
            headers=user_headers,
        )
        assert resp.status_code == 201, resp.text
        assert not resp.json()["created_at"].startswith("2020-")
        # a wrong admin token is a 401, the clock unmoved
        admin = {"X-Memory-Tenant": "eval-clock", "X-Memory-User": "clock-a"}
        resp = client.post(
            "/v1/memories",
            json={"content": "I like coffee", "type": "preference"},
            headers={**admin, "Authorization": "Bearer wrong", "X-Memory-Eval-Time": past},
        )
        assert resp.status_code == 401
        # a bad time from the admin is a 400
        resp = client.post(
            "/v1/memories",
            json={"content": "I like coffee", "type": "preference"},
            headers={**admin, "Authorization": f"Bearer {ADMIN}", "X-Memory-Eval-Time": "soon"},
        )
        assert resp.status_code == 400
        # the admin token with a tenant: the memory is saved at the simulated time
        resp = client.post(
            "/v1/memories",
            json={"content": "I like coffee", "type": "preference"},
            headers={**admin, "Authorization": f"Bearer {ADMIN}", "X-Memory-Eval-Time": past},
        )
        assert resp.status_code == 201, resp.text
        assert resp.json()["created_at"] == past
        # and the next admin request without the header is back on real time
        resp = client.post(
            "/v1/memories",
            json={"content": "I have a cat named Mochi", "type": "profile"},
            headers={**admin, "Authorization": f"Bearer {ADMIN}"},
        )
        assert resp.status_code == 201, resp.text
        assert resp.json()["created_at"][:4] == str(datetime.now(UTC).year)


# --- the arms -------------------------------------------------------------------------------


@pytest.fixture
def eval_gateway(make_gateway: GatewayFactory) -> Iterator[Gateway]:
    """A gateway whose upstream returns the scenarios' recorded answers."""
    stub = ServerThread(stub_app, free_port()).start()
    try:
        yield make_gateway(upstream_url=stub.url + "/v1")
    finally:
        stub.stop()


def _run(gateway: Gateway, scenarios: list[EvalScenario]) -> dict[str, ArmResult]:
    runner = EvalRunner(gateway.url, ADMIN, recorded=True, progress=lambda _: None)
    results = asyncio.run(runner.run(scenarios))
    # the throwaway tenant is emptied afterwards
    with httpx.Client(base_url=gateway.url, timeout=30.0) as client:
        for user in (f"{s.id}-{arm}" for s in scenarios for arm in results):
            resp = client.get(
                "/v1/memories",
                headers={
                    "Authorization": f"Bearer {ADMIN}",
                    "X-Memory-Tenant": runner.tenant,
                    "X-Memory-User": user,
                },
            )
            assert resp.json()["data"] == [], user
    return dict(results)


STANDING = """
scenarios:
  - id: standing-wrong
    category: one_time
    memories:
      - {ref: lang, content: "Always answer in English", type: preference, age_days: 5}
    wrong:
      - {ref: french, content: "Always answer in French", type: preference, kind: one_time,
         said: "answer in French this time", age_days: 1}
      - {ref: guess, content: "The user is a beginner", type: profile, kind: inferred,
         source: model_inference}
    turns:
      - message: "Summarise the plot of Hamlet in two sentences."
        expect: [lang]
        answer: {language: en, contains: [avenges]}
        answers: {off: "Hamlet avenges his father.", memory: "Hamlet avenges his father."}
        if_injected: {french: "Hamlet venge son père."}
      - message: "What is the capital of Australia?"
        at_day: 3
        expect: [lang]
        answer: {language: en}
        answers: {off: "Canberra."}
"""


def test_the_arms_differ_as_they_must(eval_gateway: Gateway, tmp_path: Path) -> None:
    scenarios = load_eval_scenarios(_write(tmp_path, STANDING))
    results = _run(eval_gateway, scenarios)
    off, memory, wrong = (results[a].metrics() for a in ("off", "memory", "wrong"))

    # no memory: nothing injected, nothing added
    assert off["injected"] == 0
    assert off["tokens_added"] == 0
    assert all(t.injected == [] for t in results["off"].turns)
    assert off["memories_never_used"] == off["memories_saved"] == 1

    # memory: the standing preference reaches both turns, nothing wrong
    assert memory["false_recalls"] == 0
    assert memory["repeated_questions_avoided"] == memory["needed_turns"] == 2
    assert memory["tokens_added"] > 0

    # wrong: the careless one-time memory is stored and injected into each turn, each
    # injection counted; the model's guess is refused by the write gate
    assert wrong["wrong_seeded"] == 1 and wrong["wrong_refused_by_gate"] == 1
    injected_french = sum("french" in t.injected for t in results["wrong"].turns)
    assert injected_french == 2
    assert wrong["false_recalls"] == injected_french
    assert wrong["false_recalls_by_kind"] == {"one_time": 2}
    assert wrong["false_recall_rate"] == round(2 / wrong["injected"], 4)
    # its recorded answer (French) fails a check, the others pass
    assert (wrong["answer_checks_passed"], wrong["answer_checks"]) == (2, 3)
    assert memory["answer_checks_passed"] == memory["answer_checks"] == 3


def test_the_shipped_pack_over_simulated_time_and_corrections(eval_gateway: Gateway) -> None:
    pack = [
        s
        for s in load_eval_scenarios(SHIPPED_EVAL)
        if s.id in {"trip-plan-expires", "old-framework-correction"}
    ]
    results = _run(eval_gateway, pack)
    memory = results["memory"]
    trip = [t for t in memory.turns if t.scenario == "trip-plan-expires"]
    assert "trip" in trip[0].injected
    assert "trip" not in trip[1].injected  # 21 simulated days later the plan has expired
    m = memory.metrics()
    # the stale framework was injected, the user corrected it once, the next turn used it
    assert m["corrections"] == 1
    assert m["correction_cost_turns"] == 1
    assert m["corrections_unresolved"] == 0
    # without memory the correction never sticks: it costs the rest of the conversation
    off = results["off"].metrics()
    assert off["corrections"] == 1 and off["corrections_unresolved"] == 1
    assert off["correction_cost_turns"] == 3
    for arm in results.values():
        assert arm.metrics()["answer_checks_skipped_turns"] == 0


# --- the command -----------------------------------------------------------------------------


def _memgate(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "eval", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_eval_refuses_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command's entry point in this process: each refusal comes before anything starts.
    monkeypatch.delenv("MEMGATE_ADMIN_TOKEN", raising=False)
    assert main(["eval", "--arms", "off,bogus"]) == 2
    assert "unknown arm 'bogus'" in capsys.readouterr().err
    bad = _write(tmp_path, "scenarios:\n  - {id: x, category: y, turns: [{message: 1}]}\n")
    assert main(["eval", "--scenarios", str(bad)]) == 2
    assert f"{bad}: scenario x: turns.0.message" in capsys.readouterr().err
    assert main(["eval", "--gateway", "http://127.0.0.1:9"]) == 2
    assert "MEMGATE_ADMIN_TOKEN" in capsys.readouterr().err


@pytest.mark.long
def test_eval_runs_the_shipped_pack_on_its_own_gateway(tmp_path: Path) -> None:
    out, chart = tmp_path / "eval.json", tmp_path / "eval.png"
    done = _memgate("--json", str(out), "--chart", str(chart))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[wrong] 10/10" in done.stderr  # progress
    for label in ("hit precision", "false-recall rate", "latency added p95 ms"):
        assert label in done.stdout
    metrics = json.loads(out.read_text())
    assert list(metrics) == ["off", "memory", "wrong"]
    assert metrics["off"]["injected"] == 0
    assert metrics["wrong"]["false_recalls"] > metrics["memory"]["false_recalls"]
    assert metrics["memory"]["answer_checks_passed"] > metrics["off"]["answer_checks_passed"]
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_readme_example_scenario_is_valid(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    example = readme.split("A minimal one:\n\n```yaml\n", 1)[1].split("```", 1)[0]
    (scenario,) = load_eval_scenarios(_write(tmp_path, example))
    assert [t.at_day for t in scenario.all_turns()] == [0.0, 3.0]
