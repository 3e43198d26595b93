"""Eval scenarios (``memgate eval``): conversations over simulated time, three arms.

The recall scenario format (``scenario_eval``) extended: a scenario may have ``turns`` (each a
chat request at a simulated time, with the memories it needs and must not get, checks of the
answer and recorded answers per arm), a scripted ``correction`` on a turn, and ``wrong``
memories seeded only in the wrong-memory arm. A recall scenario (one ``request``) is read as
a scenario of one turn, so every recall file is an eval file too. The format is documented in
the header of ``gateway/scenarios/eval.yaml``.

Answer checks are plain text rules (no judge): the language the answer is written in, words
it must or must not contain, the units it uses, no emoji, a bullet list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import Field, StringConstraints, ValidationError, model_validator

from gateway.memory.scenario_eval import (
    Ref,
    Request,
    ScenarioError,
    SeedMemory,
    _Model,
    validation_problems,
)
from gateway.memory.textsearch import mostly_han

SHIPPED_EVAL = Path(__file__).resolve().parent.parent / "scenarios" / "eval.yaml"

Arm = Literal["off", "memory", "wrong"]
ARMS: tuple[Arm, ...] = ("off", "memory", "wrong")
UserId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")]
Text = Annotated[str, StringConstraints(min_length=1)]


class WrongMemory(SeedMemory):
    """A memory that should never have been saved (or no longer holds), seeded only in the
    wrong-memory arm, the way a careless memory would have kept it."""

    kind: Literal["stale", "out_of_scope", "inferred", "one_time", "superseded"]
    source: Literal["user_stated", "user_confirmed", "model_inference", "admin"] = "user_stated"
    said: str | None = None
    """What the user actually said, when the memory distorts it (documentation only)."""


class AnswerChecks(_Model):
    """Checks of the answer that need no judge; every given check must pass."""

    language: Literal["zh", "en"] | None = None
    contains: tuple[Text, ...] = ()
    must_not_contain: tuple[Text, ...] = ()
    mentions: tuple[Text, ...] = ()
    """At least one of these appears (e.g. the project's framework under any of its names)."""
    units: Literal["metric", "imperial"] | None = None
    no_emoji: bool = False
    bullets: bool = False


class Remember(_Model):
    """The memory a correction leaves behind (the user confirmed the corrected fact)."""

    ref: Ref
    content: Text
    type: str
    scope: str = "global"
    project: str | None = None


class Correction(_Model):
    """The user corrects the answer: when a memory in ``if_injected`` was injected, or (with
    ``if_answer_fails``) when the answer failed its checks. The correction is sent as the
    next message and ``remember`` is saved (as the user would confirm the candidate)."""

    message: Text
    if_injected: tuple[Ref, ...] = ()
    if_answer_fails: bool = False
    remember: Remember | None = None


class Turn(_Model):
    message: Text
    user: UserId | None = None
    project: str | None = None
    task: str | None = None
    at_day: Annotated[float, Field(ge=0)] = 0.0
    expect: tuple[Ref, ...] = ()
    forbid: tuple[Ref, ...] = ()
    answer: AnswerChecks | None = None
    answers: dict[Arm, Text] = Field(default_factory=dict)
    """Recorded answers per arm (the offline upstream returns them); an arm without one gets
    the arm before it (``wrong`` falls back to ``memory``, ``memory`` to ``off``)."""
    if_injected: dict[Ref, Text] = Field(default_factory=dict)
    """Recorded answers that take precedence when the memory named was in the forwarded
    request (what a model would have answered with it)."""
    correction: Correction | None = None


class EvalScenario(_Model):
    id: Ref
    category: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    memories: tuple[SeedMemory, ...] = ()
    wrong: tuple[WrongMemory, ...] = ()
    request: Request | None = None
    expect: tuple[Ref, ...] = ()
    forbid: tuple[Ref, ...] = ()
    turns: tuple[Turn, ...] = ()

    @model_validator(mode="after")
    def _one_form(self) -> EvalScenario:
        if self.request is not None and self.turns:
            raise ValueError("give either request (one turn) or turns, not both")
        if self.request is None and not self.turns:
            raise ValueError("a scenario needs turns (or one request)")
        return self

    def all_turns(self) -> tuple[Turn, ...]:
        """The turns; a recall scenario's ``request`` is one turn."""
        if self.turns:
            return self.turns
        assert self.request is not None
        r = self.request
        return (
            Turn(
                message=r.message,
                project=r.project,
                task=r.task,
                expect=self.expect,
                forbid=self.forbid,
            ),
        )


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false, so the arm ``off`` stays a string (YAML 1.1 reads
    off/on/yes/no as booleans)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class _EvalFile(_Model):
    scenarios: tuple[EvalScenario, ...]


def load_eval_scenarios(path: Path = SHIPPED_EVAL) -> list[EvalScenario]:
    """The scenarios of ``path``, checked; a ``ScenarioError`` names the file, the scenario
    and the field of every problem."""
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"{path}: cannot read scenarios: {exc}") from None
    try:
        scenarios = list(_EvalFile.model_validate(raw).scenarios)
    except ValidationError as exc:
        raise ScenarioError(validation_problems(path, raw, exc)) from None
    problems: list[str] = []
    seen: set[str] = set()
    for s in scenarios:
        where = f"{path}: scenario {s.id}: "
        if s.id in seen:
            problems.append(where + "id: declared twice")
        seen.add(s.id)
        refs: set[str] = set()
        for key, seeds in (("memories", s.memories), ("wrong", s.wrong)):
            for i, m in enumerate(seeds):
                if m.ref in refs:
                    problems.append(where + f"{key}.{i}.ref: {m.ref!r} declared twice")
                refs.add(m.ref)
        if s.request is not None:
            for key in ("expect", "forbid"):
                for ref in getattr(s, key):
                    if ref not in refs:
                        problems.append(where + f"{key}: unknown memory {ref!r}")
        last_day = 0.0
        for t, turn in enumerate(s.turns):
            at = f"turns.{t}"
            if turn.at_day < last_day:
                problems.append(where + f"{at}.at_day: earlier than the turn before it")
            last_day = turn.at_day
            for key in ("expect", "forbid", "if_injected"):
                for ref in getattr(turn, key):
                    if ref not in refs:
                        problems.append(where + f"{at}.{key}: unknown memory {ref!r}")
            if turn.correction is not None:
                c = turn.correction
                for ref in c.if_injected:
                    if ref not in refs:
                        problems.append(where + f"{at}.correction.if_injected: unknown {ref!r}")
                if not c.if_injected and not c.if_answer_fails:
                    problems.append(
                        where + f"{at}.correction: say when (if_injected or if_answer_fails)"
                    )
                if c.if_answer_fails and turn.answer is None:
                    problems.append(where + f"{at}.correction.if_answer_fails: no answer checks")
                if c.remember is not None:
                    if c.remember.ref in refs:
                        problems.append(
                            where + f"{at}.correction.remember.ref: {c.remember.ref!r} declared "
                            "twice"
                        )
                    refs.add(c.remember.ref)
    if problems:
        raise ScenarioError("\n".join(problems))
    return scenarios


# ----------------------------------------------------------------------------- answer checks

_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\U00002600-\U000027bf\U0001f1e6-\U0001f1ff\U00002b50\U00002b55"
    "\U0000fe0f\U0000200d]"
)
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)、])\s+\S", re.MULTILINE)
_METRIC = re.compile(
    r"(?:\d\s*(?:km|kg|cm|mm|m|g|l|ml)\b|°C|celsius|kilomet|kilogram|metre|meter|litre|liter|"
    r"公里|千米|千克|公斤|厘米|毫米|米|摄氏|升)",
    re.IGNORECASE,
)
_IMPERIAL = re.compile(
    r"(?:\d\s*(?:mi|lb|lbs|ft|in|oz)\b|°F|fahrenheit|\bmiles?\b|\bpounds?\b|\bfeet\b|\bfoot\b|"
    r"\binch(?:es)?\b|\bounces?\b|\bgallons?\b|英里|磅|英尺|英寸|华氏|盎司)",
    re.IGNORECASE,
)


def answer_language(text: str) -> Literal["zh", "en"]:
    """zh when the answer is written in Chinese as recall reads a text (``mostly_han``: a
    Chinese answer naming tools or quoting code in English still is), else en."""
    return "zh" if mostly_han(text) else "en"


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    passed: bool
    detail: str = ""


def check_answer(text: str, checks: AnswerChecks) -> list[CheckResult]:
    """Each given check on ``text``; case-insensitive for words."""
    out: list[CheckResult] = []
    lowered = text.lower()
    if checks.language is not None:
        got = answer_language(text)
        out.append(CheckResult("language", got == checks.language, f"answered in {got}"))
    for word in checks.contains:
        out.append(CheckResult(f"contains {word!r}", word.lower() in lowered))
    for word in checks.must_not_contain:
        out.append(CheckResult(f"must not contain {word!r}", word.lower() not in lowered))
    if checks.mentions:
        found = [w for w in checks.mentions if w.lower() in lowered]
        out.append(CheckResult(f"mentions one of {list(checks.mentions)}", bool(found)))
    if checks.units is not None:
        metric, imperial = bool(_METRIC.search(text)), bool(_IMPERIAL.search(text))
        ok = (metric and not imperial) if checks.units == "metric" else (imperial and not metric)
        out.append(CheckResult(f"units {checks.units}", ok, f"metric={metric} imperial={imperial}"))
    if checks.no_emoji:
        out.append(CheckResult("no emoji", not _EMOJI.search(text)))
    if checks.bullets:
        out.append(CheckResult("bullet list", len(_BULLET.findall(text)) >= 2))
    return out
