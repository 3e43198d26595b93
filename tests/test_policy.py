"""The policy file: the default loads, and every kind of mistake is reported precisely."""

from __future__ import annotations

import functools
import os
import random
import re
import subprocess
import sys
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.memory.mine import extract
from gateway.memory.policy import (
    DETECTOR_NAMES,
    VALIDATOR_NAMES,
    Policy,
    PolicyError,
    default_policy_path,
    derive_applies,
    derive_slot,
    is_one_time,
    load_policy,
    parse_policy,
    shipped_policy_paths,
)
from gateway.memory.sensitivity import BUILTIN_DETECTORS, VALIDATORS

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_TEXT = default_policy_path().read_text(encoding="utf-8")
SHIPPED = [path.read_text(encoding="utf-8") for path in shipped_policy_paths()]

pytestmark = pytest.mark.unit  # no Redis, servers or browsers


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy()


def variant(tmp_path: Path, old: str, new: str, *, name: str = "x.yaml") -> tuple[Path, int]:
    """Write the shipped file that holds ``old`` with it replaced once, as an overlay; return
    the overlay and new's line."""
    holders = [text for text in SHIPPED if old in text]
    assert len(holders) == 1 and holders[0].count(old) == 1, f"ambiguous or missing: {old!r}"
    shipped = holders[0]
    path = tmp_path / name
    path.write_text(shipped.replace(old, new), encoding="utf-8")
    return path, shipped[: shipped.index(old)].count("\n") + 1


def error_of(path: Path) -> str:
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    return str(info.value)


# --- the default policy ------------------------------------------------------------------------


def test_default_path_is_next_to_the_package() -> None:
    path = default_policy_path()
    assert path.parts[-2:] == ("policies", "default.yaml")
    assert path.is_file()


def test_default_policy_loads_with_the_product_rules(policy: Policy) -> None:
    assert policy.origin == str(default_policy_path())
    for name in ("preference", "accessibility", "format", "tone", "length"):
        assert policy.tier(name) == "long_term"
        assert policy.ttl_for(name) is None
    assert policy.ttl_for("project") == timedelta(days=365)
    assert policy.type("project").requires_project
    assert policy.ttl_for("goal") == timedelta(days=30)
    assert policy.ttl_for("plan") == timedelta(days=14)
    assert set(policy.types_in_tier("session")) >= {"roleplay", "session"}
    assert policy.types_in_tier("inference") == ("inference",)

    assert policy.source("model_inference").store == "on_confirmation"
    assert policy.source("model_inference").confirmed_as == "user_confirmed"
    assert policy.recallable_sources == {"user_stated", "user_confirmed", "admin"}
    assert policy.has_source("import") and not policy.source("import").recall

    assert policy.sensitivity.store_levels == ("low", "medium")
    assert policy.sensitivity.may_inject("medium") and not policy.sensitivity.may_inject("high")

    recall = policy.recall
    assert (recall.max_memories, recall.token_budget, recall.trace_ttl_days) == (6, 500, 7)
    assert (recall.standing.max, recall.topical.max) == (5, 2)
    assert recall.topical.close_max > recall.topical.max and 0 < recall.topical.close_within < 0.1
    # Relevance stands on meaning; shared words need a meaning that is not unrelated and
    # more than one word; a shared topic links what shares no words.
    bar = recall.relevance
    assert 0 < bar.shared_terms_min_similarity < bar.similarity < 1 and bar.shared_terms >= 2
    assert policy.applies.default == "relevant"
    assert {"accessibility", "format"} <= set(policy.applies.types)
    assert {"language", "units", "name", "output_format"} <= set(policy.applies.slots)
    assert {"food", "health", "pets", "coding"} <= {t.name for t in policy.topics}
    assert {"language", "units", "framework", "location"} <= policy.one_valued_slots
    assert "output_format" not in policy.one_valued_slots
    assert recall.candidate_pool >= recall.max_memories
    assert policy.dedup.similarity > policy.conflict.similarity
    assert policy.archive.retention_days > 0 and policy.candidates.ttl_days > 0
    assert policy.limits.max_content_chars == 2000


def test_accessors_reject_unknown_names(policy: Policy) -> None:
    with pytest.raises(KeyError):
        policy.type("nope")
    with pytest.raises(KeyError):
        policy.source("nope")
    with pytest.raises(KeyError):
        policy.slot("nope")
    assert not policy.has_type("nope")


def test_policy_is_frozen(policy: Policy) -> None:
    with pytest.raises(ValueError):
        policy.recall.max_memories = 10  # type: ignore[misc]


def test_validator_and_detector_names_match_their_implementations() -> None:
    assert set(VALIDATORS) == VALIDATOR_NAMES
    assert set(BUILTIN_DETECTORS) == DETECTOR_NAMES


def test_every_declared_example_behaves(policy: Policy) -> None:
    # The loader checks these too; this keeps the examples honest if the loader changes.
    for rule in policy.one_time.patterns:
        for example in rule.examples:
            assert is_one_time(example, policy), example
    for example in policy.one_time.not_one_time:
        assert not is_one_time(example, policy), example
    for slot in policy.slots:
        for example in slot.examples:
            assert derive_slot(example, policy) == slot.name, example
    # A mining rule's example, said on its own, is mined by that rule.
    for rule in policy.mining.rules:
        for example in rule.examples:
            mined = extract([{"role": "user", "content": example}], project_id="p", policy=policy)
            assert [(p.rule, p.type) for p in mined.proposals] == [(rule.name, rule.type)]
    for spec in policy.mining.questions:
        for example in spec.examples:
            mined = extract([{"role": "user", "content": example}], project_id="p", policy=policy)
            assert mined.proposals == [], example


def test_parse_policy_labels_errors_with_the_given_name() -> None:
    bad = DEFAULT_TEXT.replace("  max_memories: 6", "  max_memories: -1")
    with pytest.raises(PolicyError, match=r"^deploy/policy\.yaml:\d+: recall\.max_memories: "):
        parse_policy(bad, "deploy/policy.yaml")


# --- strict validation: file, line, key path ---------------------------------------------------


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "version: 1\n", "version: 1\nrecal:\n  max_memories: 3\n")
    line += 1
    assert f"{path}:{line}: recal: unknown key" in error_of(path)


def test_unknown_nested_key(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "  token_budget: 500", "  token_budgett: 500")
    message = error_of(path)
    assert f"{path}:{line}: recall.token_budgett: unknown key" in message


def test_a_missing_key_is_reported_at_its_parent(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("types:\n  trip:\n    ttl_days: 3\n", encoding="utf-8")
    assert f"{overlay}:2: types.trip.tier: Field required" in error_of(overlay)


def test_unknown_key_in_a_list_item(tmp_path: Path) -> None:
    path, line = variant(
        tmp_path, "    - name: pypi_token\n", "    - name: pypi_token\n      colour: red\n"
    )
    message = error_of(path)
    assert re.search(
        rf"{re.escape(str(path))}:{line + 1}: sensitivity\.patterns\[\d+\]\.colour:", message
    )


def test_bad_value_names_file_line_and_key(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "  max_memories: 6 ", "  max_memories: 0 ")
    assert error_of(path) == (f"{path}:{line}: recall.max_memories: Input should be greater than 0")


def test_wrong_type(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "    ttl_days: 14\n", "    ttl_days: two weeks\n")
    message = error_of(path)
    assert f"{path}:{line}: types.plan.ttl_days: Input should be a valid integer" in message


def test_fraction_out_of_range(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "  similarity: 0.92", "  similarity: 1.5")
    assert f"{path}:{line}: dedup.similarity: Input should be less than or equal to 1" in (
        error_of(path)
    )


def test_unknown_tier(tmp_path: Path) -> None:
    old = "  format:\n    tier: long_term\n"
    path, line = variant(tmp_path, old, "  format:\n    tier: forever\n")
    assert f"{path}:{line + 1}: types.format.tier: Input should be" in error_of(path)


def test_bad_type_name(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "  goal:\n", "  Big-Goal:\n")
    assert f"{path}:{line}: types.Big-Goal: String should match pattern" in error_of(path)


def test_bad_regex_reports_its_line(tmp_path: Path) -> None:
    old = "      regex: '(?<![A-Za-z0-9])ya29\\.[0-9A-Za-z_-]{20,}'\n"
    path, line = variant(tmp_path, old, "      regex: '(?<![A-Za-z0-9])ya29\\.[0-9A-Za-z_-{20,}'\n")
    message = error_of(path)
    assert re.search(
        rf"^{re.escape(str(path))}:{line}: sensitivity\.patterns\[\d+\]\.regex: "
        r"invalid regular expression: ",
        message,
    ), message


def test_bad_one_time_regex(tmp_path: Path) -> None:
    path, line = variant(
        tmp_path, "    - regex: '今天(?:先|就|只|暂时)'", "    - regex: '今天(?:先|就'"
    )
    assert re.search(rf":{line}: one_time\.patterns\[\d+\]\.regex: invalid regular", error_of(path))


def test_bad_slot_regex(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "      - regex: '缩进|", "      - regex: '缩进(|")
    assert re.search(
        rf":{line}: slots\[\d+\]\.patterns\[1\]\.regex: invalid regular", error_of(path)
    )


def test_unknown_validator(tmp_path: Path) -> None:
    path, line = variant(
        tmp_path, "      validator: prc_id_checksum", "      validator: prc_id_checksumm"
    )
    message = error_of(path)
    assert re.search(rf":{line}: sensitivity\.patterns\[\d+\]\.validator: Input should be", message)


def test_unknown_detector(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "      detector: sendgrid", "      detector: sendgird")
    assert re.search(
        rf":{line}: sensitivity\.patterns\[\d+\]\.detector: Input should be", error_of(path)
    )


def test_pattern_needs_regex_or_detector(tmp_path: Path) -> None:
    path, _ = variant(
        tmp_path, "      detector: sendgrid\n", "      detector: sendgrid\n      regex: 'SG'\n"
    )
    assert "give exactly one of 'regex' or 'detector'" in error_of(path)


def test_group_beyond_the_regex(tmp_path: Path) -> None:
    old = "      requires: [ssn, social security]\n      group: 1"
    path, line = variant(tmp_path, old, old.replace("group: 1", "group: 2"))
    assert re.search(
        rf":{line + 1}: sensitivity\.patterns\[\d+\]\.group: the regex has only 1", error_of(path)
    )


def test_time_limited_type_needs_a_ttl(tmp_path: Path) -> None:
    path = tmp_path / "overlay.yaml"
    path.write_text("types:\n  trip:\n    tier: time_limited\n", encoding="utf-8")
    assert f"{path}:3: types.trip.tier: a time_limited type needs ttl_days" in error_of(path)


def test_long_term_type_cannot_expire(tmp_path: Path) -> None:
    old = "  accessibility:\n    tier: long_term\n"
    path, line = variant(tmp_path, old, old + "    ttl_days: 5\n")
    assert f"{path}:{line + 2}: types.accessibility.ttl_days: only time_limited" in error_of(path)


def test_unknown_source_reference(tmp_path: Path) -> None:
    old = "    confirmed_as: user_confirmed\n"
    path, line = variant(tmp_path, old, "    confirmed_as: the_user\n")
    assert f"{path}:{line}: sources.model_inference.confirmed_as: unknown source 'the_user'" in (
        error_of(path)
    )


def test_model_inference_is_never_recalled(tmp_path: Path) -> None:
    old = "    recall: false       # a guess is never recalled; once confirmed it is user_confirmed"
    path, line = variant(tmp_path, old, "    recall: true")
    assert f"{path}:{line}: sources.model_inference.recall: model inferences are never" in (
        error_of(path)
    )


def test_slot_type_must_exist(tmp_path: Path) -> None:
    old = "  - name: framework\n    description: The backend / web framework of a project.\n"
    path, line = variant(tmp_path, old, old + "    types: [project, projects]\n")
    assert re.search(
        rf":{line + 2}: slots\[\d+\]\.types\[1\]: unknown memory type 'projects'", error_of(path)
    )


def test_a_length_wish_in_unlisted_words_is_of_the_length_slot(policy: Policy) -> None:
    """A memory of a type a slot is ``of_types`` takes that slot when no slot's rules place
    it, so the newer length wish replaces the older however it is worded; without the type
    the words alone decide, and a slot's rules still win over the type."""
    text = "最近忙疯了，回答尽量短，给要点就行"
    assert derive_slot(text, policy) is None
    assert derive_slot(text, policy, "length") == "length"
    assert derive_slot(text, policy, "preference") is None
    assert derive_slot("use bullet points, no walls of prose", policy, "length") == "output_format"
    # ... but not one for some answers only, which replaces no wish for all of them
    assert derive_slot("讲历史的时候可以展开讲讲", policy, "length") is None
    assert derive_slot("When I ask for a recipe, give the full method", policy, "length") is None
    # so is a tone wish: the gentler one replaces "roast my code"
    gentle = "最近压力很大，说话温柔点，多鼓励我"
    assert derive_slot("Be brutally blunt with my code, roast it", policy, "tone") == "tone"
    assert derive_slot(gentle, policy, "tone") == "tone"


def test_a_type_is_of_one_slot_and_must_exist(tmp_path: Path) -> None:
    old = "    of_types: [length]\n"
    path, line = variant(tmp_path, old, "    of_types: [length, lenght]\n")
    assert re.search(
        rf":{line}: slots\[\d+\]\.of_types\[1\]: unknown memory type 'lenght'", (error_of(path))
    )
    path, line = variant(tmp_path, "    of_types: [tone]\n", "    of_types: [tone, length]\n")
    assert re.search(
        rf":{line}: slots\[\d+\]\.of_types\[1\]: length is of slot length", error_of(path)
    )


def test_a_text_to_write_is_checked_against_its_examples(tmp_path: Path, policy: Policy) -> None:
    """What the writing rules read as a text to write (or not) is held to their examples
    at load."""
    from gateway.memory.policy import asks_for_writing

    assert asks_for_writing("Write a thank you note to my lab partner for covering for me", policy)
    assert not asks_for_writing("write a 4-week running plan", policy)
    assert asks_for_writing("write me a limerick about a cat who hates Mondays", policy)
    old = '                     "what should I write in my diary",'
    path, line = variant(tmp_path, old, '                     "write a poem for my gran",')
    assert re.search(
        rf"{re.escape(str(path))}:{line}: recall\.relevance\.writing\.not_examples\[\d\]: "
        "a request to write",
        error_of(path),
    )


def test_one_time_example_must_match(tmp_path: Path) -> None:
    old = "      examples: [今天先简单说说]"
    path, line = variant(tmp_path, old, "      examples: [明天再说]")
    assert re.search(
        rf":{line}: one_time\.patterns\[\d+\]\.examples\[0\]: the regex does not", error_of(path)
    )


def test_not_one_time_example_must_not_match(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "    - 我叫李雷\n", "    - 这次叫我李雷\n")
    assert re.search(
        rf":{line}: one_time\.not_one_time\[\d+\]: a one_time pattern matches", error_of(path)
    )


@pytest.mark.parametrize(
    ("old", "new", "offset", "problem"),
    [
        # a rule ends one way only
        (
            "      month: 10\n",
            "      month: 10\n      days: 7\n",
            -1,
            r"horizons\.rules\[\d+\]: needs exactly one of days, month_end",
        ),
        # a day of the month is read from its day group, and only such a rule reads one
        (
            "      day_of_month: true\n",
            "      day_of_month: true\n      days: 3\n",
            -1,
            r"horizons\.rules\[\d+\]: needs exactly one of",
        ),
        (
            "      day_of_month: true\n",
            "      days: 3\n",
            None,
            r"horizons\.rules\[\d+\]\.regex: only a named_month or day_of_month rule reads",
        ),
        (
            "      month: 10\n",
            "      day_of_month: true\n",
            None,
            r"horizons\.rules\[\d+\]\.regex: a day_of_month rule needs a \(\?P<day>",
        ),
        # a part of a month is a day of the month month_end names
        (
            "      month: 10\n",
            "      days: 3\n      by_day: 10\n",
            1,
            r"horizons\.rules\[\d+\]\.by_day: by_day is a day of the month month_end names",
        ),
        # an undated kind names only types horizons end
        (
            "  undated:\n    - types: [goal]\n",
            "  undated:\n    - types: [goal, preference]\n",
            1,
            r"horizons\.undated\[0\]\.types\[1\]: preference is not in horizons",
        ),
    ],
)
def test_a_horizon_rule_that_cannot_be_read_is_refused(
    tmp_path: Path, old: str, new: str, offset: int | None, problem: str
) -> None:
    path, line = variant(tmp_path, old, new)
    where = "" if offset is None else f":{line + offset}: "
    assert re.search(where + problem, error_of(path))


def test_a_span_is_counted_in_days_and_ends_known_types(tmp_path: Path) -> None:
    old = "      month: 10\n"
    path, line = variant(tmp_path, old, "      month: 10\n      spell: true\n")
    assert re.search(
        rf":{line + 1}: horizons\.rules\[\d+\]\.spell: a span is counted", error_of(path)
    )
    old = "  spell_types: [preference, format, tone, length]\n"
    path, line = variant(tmp_path, old, "  spell_types: [preference, goal, wish]\n")
    error = error_of(path)
    assert re.search(rf":{line}: horizons\.spell_types\[1\]: goal already ends", error)
    assert re.search(rf":{line}: horizons\.spell_types\[2\]: unknown memory type", error)


def test_what_keeps_a_wish_from_lapsing_is_checked(tmp_path: Path) -> None:
    old = (
        "      examples: [每次总结这周的工作，都用三段式, "
        '"Every Friday, ask me what went well this week", 从这周开始我只喝无糖的]'
    )
    path, line = variant(tmp_path, old, "      examples: [keep it brief this week]")
    assert re.search(rf":{line}: horizons\.spell_unless\[0\]\.examples\[0\]", error_of(path))


def test_a_general_questions_examples_are_checked(tmp_path: Path) -> None:
    old = '      examples: ["Why do dogs wag their tails?", 中国古代的婚礼有哪些主要的礼仪和习俗？]'
    path, line = variant(tmp_path, old, '      examples: ["Why does my dog wag his tail?"]')
    assert re.search(
        rf":{line}: recall\.relevance\.general_questions\.examples\[0\]: not a general",
        error_of(path),
    )
    old = "                     我的代码为什么报空指针异常？,"
    path, line = variant(tmp_path, old, "                     为什么天空是蓝色的？,")
    assert re.search(
        rf":{line}: recall\.relevance\.general_questions\.not_examples\[2\]: a general",
        error_of(path),
    )


def test_slot_example_must_derive_its_slot(tmp_path: Path) -> None:
    old = (
        "    examples: [I use Neovim, 我用 VSCode 写代码, My IDE is PyCharm,"
        " 'switched to Zed a few weeks ago, not going back']"
    )
    path, line = variant(tmp_path, old, "    examples: [I use Neovim, project uses Flask]")
    assert re.search(
        rf":{line}: slots\[\d+\]\.examples\[1\]: derives slot 'framework', not 'editor'",
        error_of(path),
    )


def test_bad_mining_rule_regex(tmp_path: Path) -> None:
    old = "      regex: '备考|"
    path, line = variant(tmp_path, old, "      regex: '(备考|")
    message = error_of(path)
    assert re.search(
        rf"^{re.escape(str(path))}:{line}: mining\.rules\[\d+\]\.regex: "
        r"invalid regular expression: ",
        message,
    ), message


def test_bad_mining_filler_regex(tmp_path: Path) -> None:
    old = "    regex: '(?i)^\\s*(?:(?:oh|"
    path, line = variant(tmp_path, old, "    regex: '(?i)^\\s*(?:(?:(oh|")
    assert re.search(rf":{line}: mining\.filler\.regex: invalid regular", error_of(path))


def test_mining_rule_type_must_exist(tmp_path: Path) -> None:
    old = "      type: accessibility\n      regex: '色盲"
    path, line = variant(tmp_path, old, old.replace("accessibility", "accessibilty"))
    assert re.search(
        rf":{line}: mining\.rules\[\d+\]\.type: unknown memory type 'accessibilty'",
        error_of(path),
    )


def test_mining_fallback_type_must_exist(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "  fallback_type: profile", "  fallback_type: profil")
    assert f"{path}:{line}: mining.fallback_type: unknown memory type 'profil'" in error_of(path)


def test_mining_rule_names_are_unique(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "    - name: accessibility_zh", "    - name: accessibility_en")
    assert re.search(
        rf":{line}: mining\.rules\[\d+\]\.name: rule 'accessibility_en' is declared twice",
        error_of(path),
    )


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        (
            "      examples: [我在备考雅思, 我想学会游泳]",
            "      examples: [我在备考雅思, 我想去游泳]",
            r"mining\.rules\[\d+\]\.examples\[1\]",
        ),
        # what keeps a text out of a topic is checked like the rest
        (
            "        examples: [老年狗吃什么狗粮比较好, 猫能吃酸奶吗]",
            "        examples: [老年狗吃什么狗粮比较好, 晚饭吃什么]",
            r"topics\[\d+\]\.unless\[\d+\]\.examples\[1\]",
        ),
    ],
)
def test_a_rules_examples_must_match(tmp_path: Path, old: str, new: str, where: str) -> None:
    path, line = variant(tmp_path, old, new)
    assert re.search(rf":{line}: {where}: the regex does not match it", error_of(path))


def test_mining_rule_example_must_not_be_taken_by_an_earlier_rule(tmp_path: Path) -> None:
    # The first matching rule wins, so this example could never be typed by its own rule.
    old = "      examples: [I prefer Python, from now on answer in English]"
    path, line = variant(tmp_path, old, "      examples: [I prefer Python, always use tables]")
    assert re.search(
        rf":{line}: mining\.rules\[\d+\]\.examples\[1\]: rule 'format_en' matches it "
        r"first, not 'preference_en'",
        error_of(path),
    )


def test_mining_horizon_example_must_match(tmp_path: Path) -> None:
    old = "    examples: [in March, next week,"
    path, line = variant(tmp_path, old, "    examples: [some day, next week,")
    assert re.search(
        rf":{line}: mining\.horizon\.examples\[0\]: the regex does not", error_of(path)
    )


def test_high_sensitivity_can_never_be_stored(tmp_path: Path) -> None:
    path, line = variant(
        tmp_path, "  store_levels: [low, medium]", "  store_levels: [low, medium, high]"
    )
    assert f"{path}:{line}: sensitivity.store_levels[2]: high-sensitivity text is never stored" in (
        error_of(path)
    )


def test_fusion_weights_add_up(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "    text: 0.2", "    text: 0.5")
    assert f"{path}:{line - 2}: recall.weights: vector and text weights must add up to 1" in (
        error_of(path)
    )


def test_candidate_pool_covers_max_memories(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "  candidate_pool: 12 ", "  candidate_pool: 2 ")
    assert f"{path}:{line}: recall.candidate_pool: must be at least recall.max_memories" in (
        error_of(path)
    )


def test_an_overlay_cannot_remove_a_section(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("# no limits\nlimits:\n", encoding="utf-8")
    assert f"{path}:2: limits: Input should be a valid dictionary" in error_of(path)


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "  max_memories: 6 ", "  max_memories: 3\n  max_memories: 30 ")
    assert f"{path}:{line + 1}: recall.max_memories: duplicate key" in error_of(path)


def test_yaml_syntax_error(tmp_path: Path) -> None:
    path, line = variant(tmp_path, "  max_memories: 6 ", "  max_memories: [3 ")
    message = error_of(path)
    assert re.match(rf"{re.escape(str(path))}:(\d+): invalid YAML", message)
    # libyaml notices the unclosed bracket where the next key starts.
    assert line <= int(message.split(":")[1]) <= line + 1


def test_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n", encoding="utf-8")
    assert error_of(path) == f"{path}:1: the policy must be a YAML mapping"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    assert error_of(path).startswith(f"{path}: cannot read policy")


def test_all_problems_are_reported_in_line_order(tmp_path: Path) -> None:
    text = DEFAULT_TEXT.replace("  max_memories: 6 ", "  max_memories: 0 ").replace(
        "  retention_days: 30", "  retention_days: -3"
    )
    path = tmp_path / "x.yaml"
    path.write_text(text, encoding="utf-8")
    lines = error_of(path).splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        "recall.max_memories",
        "archive.retention_days",
    ]


# --- property-based --------------------------------------------------------------------------

MAX_MEMORIES_LINE = DEFAULT_TEXT[: DEFAULT_TEXT.index("  max_memories: 6 ")].count("\n") + 1


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.integers(min_value=-1000, max_value=1000))
def test_max_memories_accepts_exactly_positive_integers(value: int) -> None:
    text = DEFAULT_TEXT.replace("  max_memories: 6 ", f"  max_memories: {value} ")
    text = text.replace("  candidate_pool: 12 ", f"  candidate_pool: {max(value, 12)} ")
    if value > 0:
        assert parse_policy(text, "p.yaml").recall.max_memories == value
    else:
        with pytest.raises(PolicyError) as info:
            parse_policy(text, "p.yaml")
        assert str(info.value) == (
            f"p.yaml:{MAX_MEMORIES_LINE}: recall.max_memories: Input should be greater than 0"
        )


SECTIONS = ["mining", "recall", "dedup", "conflict", "archive", "candidates", "limits"]


@functools.cache
def _known_keys(section: str) -> frozenset[str]:
    """The shipped policy's keys in ``section`` (loaded once, not once per example)."""
    return frozenset(type(getattr(load_policy(), section)).model_fields)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    section=st.sampled_from(SECTIONS),
    key=st.from_regex(r"[a-z][a-z_]{2,20}", fullmatch=True),
)
def test_any_unknown_key_is_named_with_its_line(section: str, key: str) -> None:
    if key in _known_keys(section):
        return
    with pytest.raises(PolicyError) as info:
        parse_policy(f"# overlay\n{section}:\n  {key}: 1\n", "p.yaml")
    assert f"p.yaml:3: {section}.{key}: unknown key" in str(info.value)


# --- overlays ----------------------------------------------------------------------------------


def test_an_overlay_changes_one_knob_and_keeps_the_rules(policy: Policy) -> None:
    custom = parse_policy("recall:\n  max_memories: 4\n", "overlay.yaml")
    assert custom.origin == "overlay.yaml"
    assert custom.recall.max_memories == 4
    assert custom.recall.token_budget == policy.recall.token_budget
    assert custom.sensitivity.patterns == policy.sensitivity.patterns
    assert custom.mining == policy.mining and custom.topics == policy.topics


def test_an_overlay_merges_mappings_and_replaces_lists(policy: Policy) -> None:
    overlay = (
        "types:\n  trip:\n    tier: time_limited\n    ttl_days: 10\n"
        "topics:\n  - name: travel\n    keywords: [flight, hotel]\n"
        "sensitivity:\n  inject_levels: [low]\n"
    )
    custom = parse_policy(overlay, "overlay.yaml")
    assert set(custom.types) == {*policy.types, "trip"}
    assert custom.ttl_for("trip") == timedelta(days=10)
    assert [t.name for t in custom.topics] == ["travel"]
    assert custom.sensitivity.inject_levels == ("low",)
    assert custom.sensitivity.store_levels == policy.sensitivity.store_levels
    assert custom.sensitivity.patterns == policy.sensitivity.patterns


def test_an_empty_overlay_is_the_shipped_policy(tmp_path: Path, policy: Policy) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing changed\n", encoding="utf-8")
    assert load_policy(path).model_dump() == policy.model_dump()


def test_errors_in_a_list_an_overlay_replaced_name_the_overlay() -> None:
    overlay = "# topics\ntopics:\n  - name: travel\n    keywords: [flight]\n    reaches: [moon]\n"
    with pytest.raises(PolicyError) as info:
        parse_policy(overlay, "overlay.yaml")
    assert str(info.value) == "overlay.yaml:5: topics[0].reaches[0]: unknown topic 'moon'"


def test_a_topic_displaces_only_topics_the_policy_names() -> None:
    overlay = "topics:\n  - name: travel\n    keywords: [flight]\n    displaces: [moon]\n"
    with pytest.raises(PolicyError) as info:
        parse_policy(overlay, "overlay.yaml")
    assert str(info.value) == "overlay.yaml:4: topics[0].displaces[0]: unknown topic 'moon'"


def test_the_repository_example_overlay_is_valid() -> None:
    example = ROOT / "policies" / "example.yaml"
    assert load_policy(example).origin == str(example)
    assert len(example.read_text(encoding="utf-8").splitlines()) < 80


def test_the_built_wheel_carries_the_policy(tmp_path: Path) -> None:
    """A non-editable install has no repository next to it: the policy is package data.

    Built with the test environment's setuptools (pinned in the ``test`` extra, within the
    build-system's requirement) rather than a fresh isolated build environment: the same
    backend reads the same package-data configuration, without fetching it first."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("memgate-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "gateway/policies/default.yaml" in names
        assert "gateway/policies/rules.yaml" in names
        assert not any(name.startswith(("policies/", "tests/", "benchmarks/")) for name in names)
        archive.extractall(site)
    code = (
        "import gateway, gateway.memory.policy as p; "
        "print(gateway.__file__); print(p.load_policy().recall.max_memories)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    assert out[0].startswith(str(site)) and out[1] == "6"


def test_topic_detection_by_index_decides_as_each_topic_does(policy: Policy) -> None:
    """``topics_of`` looks keywords, and the words patterns need, up in one index (a request
    may pay it before its searches are sent); each topic's own ``matches`` is the reference,
    on every topic example, the shipped scenarios' texts and random mixtures of their words
    (and of the words patterns need) in both languages."""
    from gateway.memory.policy import normalize, plain_words, topics_of
    from gateway.memory.scenario_eval import SHIPPED, load_scenarios

    texts = [t for topic in policy.topics for t in (*topic.examples, *topic.not_examples)]
    for scenario in load_scenarios(SHIPPED):
        texts += [scenario.request.message, *(m.content for m in scenario.memories)]
    keywords = [k for topic in policy.topics for k in topic.keywords]
    by_name = {t.name: t for t in policy.topics}
    kinds = [*sorted({k for t in policy.topics for k in t.types}), "profile"]
    # the words a pattern needs before it is tried, alone and inside other words
    keywords += [n for topic in policy.topics for r in topic.patterns for n in r.needs]
    keywords += ["x" + n + "s" for topic in policy.topics for r in topic.patterns for n in r.needs]
    rng = random.Random(5)
    for _ in range(800):
        parts = rng.sample(texts, 2) + rng.sample(keywords, 3)
        rng.shuffle(parts)
        texts.append(
            rng.choice(["", " ", "，"]).join(parts).upper()
            if rng.random() < 0.2
            else " ".join(parts)
        )
    assert len(texts) > 1000
    for text in texts:
        folded = normalize(text)
        lowered = folded.lower()
        words = plain_words(lowered)
        want = [t.name for t in policy.topics if t.matches(folded, lowered, words)]
        assert topics_of(text, policy) == want, text
        # a memory's type limits the topics it may hold (TopicSpec.types)
        for kind in kinds:
            held = [n for n in want if not by_name[n].types or kind in by_name[n].types]
            assert topics_of(text, policy, kind) == held, (text, kind)


def test_topic_index_of_no_topics_finds_nothing() -> None:
    from gateway.memory.policy import TopicKeywords

    assert TopicKeywords.of(()).read("我对花生过敏 peanut", frozenset({"peanut"})) == (set(), {})


def test_the_topics_a_request_reaches_do_not_depend_on_order_or_on_asking_before(
    policy: Policy,
) -> None:
    """``topics_reaching`` keeps what it worked out per set of topics: asking again, in
    another order, gives what a policy that never asked gives."""
    fresh = load_policy()
    names = [t.name for t in policy.topics]
    rng = random.Random(11)
    for _ in range(200):
        asked = rng.sample(names, rng.randint(0, 3))
        once = fresh.topics_reaching(asked)
        assert policy.topics_reaching(asked) == once
        assert policy.topics_reaching(list(reversed(asked))) == once
        assert fresh.topics_reaching(asked) == once
    assert policy.topics_reaching([]) == frozenset()
    assert "food" in policy.topics_reaching(["food"])


def test_a_slot_does_not_match_its_not_examples(tmp_path: Path) -> None:
    old = (
        "    not_examples: [Moved to JetBrains Rider as my main editor, I have moved to an iPhone,"
    )
    path, line = variant(tmp_path, old, "    not_examples: [I live in Berlin,")
    at = [slot.name for slot in load_policy().slots].index("location")
    assert f"{path}:{line}: slots[{at}].not_examples[0]: slot 'location' matches it" in (
        error_of(path)
    )
    # `unless` is what keeps a move to another editor out of the slot
    policy = load_policy()
    assert derive_slot("Moved to JetBrains Rider as my main editor", policy) == "editor"
    assert derive_slot("I've just moved to Berlin", policy) == "location"


def test_a_slots_values_and_the_change_rules_are_checked(tmp_path: Path) -> None:
    old = "      keto: {regex: '(?i)(?<![a-z])keto|生酮'}"
    path, line = variant(tmp_path, old, "      keto: {regex: '(?i)(keto'}")
    assert re.search(rf":{line}: slots\[\d+\]\.options\.keto\.regex: ", error_of(path))
    old = "    - regex: '不再|别再|不要再|"
    path, line = variant(tmp_path, old, "    - regex: '(不再|别再|不要再|")
    assert re.search(rf":{line}: changes\.patterns\[1\]\.regex: ", error_of(path))


def test_a_slot_ends_on_a_change_only_other_slots_it_names() -> None:
    overlay = "slots:\n  - name: job\n    keywords: [job]\n    change_ends: [shfit]\n"
    with pytest.raises(PolicyError) as info:
        parse_policy(overlay, "overlay.yaml")
    assert "slots[0].change_ends[0]: not another slot: 'shfit'" in str(info.value)


@pytest.mark.parametrize(
    ("overlay", "errors"),
    [
        # a slot yields only to other slots that list values
        (
            "slots:\n  - name: job\n    keywords: [job]\n"
            "    unless_moving_to: [edtior, shift, job]\n"
            "  - name: shift\n    patterns: [{regex: night shifts}]\n",
            [
                "slots[0].unless_moving_to[0]: not another slot: 'edtior'",
                "slots[0].unless_moving_to[1]: slot 'shift' lists no keywords",
                "slots[0].unless_moving_to[2]: not another slot: 'job'",
            ],
        ),
        # only a one-valued slot has aspects, each a valid rule
        (
            "slots:\n  - name: hobby\n    values: many\n    keywords: [hobby]\n"
            "    aspects:\n      outdoor: {regex: '(?i)(hiking'}\n",
            [
                "slots[0].aspects.outdoor.regex: ",
                "slots[0].aspects: only a one-valued slot has aspects",
            ],
        ),
        # a word naming the slot must be one of its keywords
        (
            "slots:\n  - name: editor\n    keywords: [Vim, 编辑器]\n    generic: [editor]\n",
            ["slots[0].generic[0]: not one of the slot's keywords: 'editor'"],
        ),
    ],
)
def test_what_a_slot_yields_to_and_its_aspects_are_checked(overlay: str, errors: list[str]) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(overlay, "overlay.yaml")
    for error in errors:
        assert error in str(info.value)


def test_a_day_is_read_only_with_a_named_month(tmp_path: Path) -> None:
    old = "      named_month: true\n      examples: [the flat is ours from 1st of July"
    path, line = variant(tmp_path, old, old.replace("named_month: true", "days: 1"))
    assert line and re.search(r"horizons\.rules\[\d+\]\.regex: only a named_month", error_of(path))


def test_an_overlay_may_keep_a_kind_of_need_topical() -> None:
    text = "I use a wheelchair"
    shipped = load_policy()
    assert derive_applies(text, shipped, "accessibility", derive_slot(text, shipped), "global") == (
        "always"
    )
    overlay = "applies:\n  relevant:\n    - regex: '(?i)wheelchair'\n"
    kept = parse_policy(overlay, "overlay.yaml")
    slot = derive_slot(text, kept)
    assert derive_applies(text, kept, "accessibility", slot, "global") == "relevant"


def test_only_a_one_valued_slot_names_its_values() -> None:
    overlay = (
        "slots:\n  - name: pets\n    values: many\n    keywords: [cat]\n"
        "    options:\n      cat: {regex: 'cat'}\n"
    )
    with pytest.raises(PolicyError) as info:
        parse_policy(overlay, "overlay.yaml")
    assert "slots[0].options: only a one-valued slot names its values" in str(info.value)


def test_a_topics_unless_keeps_a_text_out_whatever_else_matches(policy: Policy) -> None:
    from gateway.memory.policy import topics_of

    food = next(t for t in policy.topics if t.name == "food")
    assert food.unless
    for text in ("what can an older rabbit eat apart from hay?", "猫能吃酸奶吗"):
        assert "food" not in topics_of(text, policy) and not food.matches(text)
        assert "pets" in topics_of(text, policy)
    assert "food" in topics_of("what should I eat tonight? my cat is asleep", policy)


@pytest.mark.parametrize(
    ("text", "inside"),
    [
        # the user's hours, told any way, and plans of the user's time
        ("night security guard, I sleep roughly 8am to 3pm", True),
        ("work saturdays at Greggs 8 till 4", True),
        ("孩子上小学三年级，每天下午四点放学要去接", True),
        ("12 hour shifts on the renal ward", True),
        ("when can I realistically squeeze the gym in on a work day", True),
        ("想开始练练身体 一天里啥时候去健身房比较合适", True),
        ("can you sort me out a revision timetable for the easter hols", True),
        # a schedule of code, a flight's hour, a count
        ("How do I run a cron job every 5 minutes?", False),
        ("flying to Dublin on the 20th at 7am", False),
        ("I have 2 to 3 cats", False),
    ],
)
def test_the_users_hours_meet_plans_of_the_users_time(
    policy: Policy, text: str, inside: bool
) -> None:
    from gateway.memory.policy import derive_slot, memory_topics

    slot = derive_slot(text, policy, "profile")
    assert ("timetable" in memory_topics(text, policy, "profile", slot)) is inside


@pytest.mark.parametrize(
    ("text", "topic", "about"),
    [
        # what to bring on a trip, not the papers an office asks for
        ("去海边要带什么", "packing", True),
        ("医保卡丢了怎么补办？要带什么材料", "packing", False),
        # a word of a topic used for something else
        ("play bass in a pub band most Fridays", "food", False),
        ("每天晚饭后去跳广场舞", "food", False),
        ("养了只柯基叫土豆", "food", False),
        ("Mom is visiting next week", "travel", False),
        ("周六搬家，东西还没打包完", "travel", False),
        ("how do i get red wine out of a white shirt, spilled it", "clothing", False),
        ("recommend a vacuum, my current one is dying and I'm sick of it", "health", False),
        ("她数学比较弱，一碰到应用题就哭", "software", False),
        ("这几天腰酸背痛，晚上也睡不好", "agenda", False),
        ("帮我排一下这几天的写作计划", "agenda", True),
        ("Help me sketch out a weekly routine so I can get some paid work going", "crafts", False),
        ("我的民宿在阳朔，两间房", "business", True),
        ("帮我写一条发给新 guest 的欢迎消息", "lodging", True),
        ("周末喜欢打 switch", "games", True),
        ("衣服上沾了圆珠笔印，怎么洗掉", "clothing", False),
        ("heating's making a loud banging noise again", "home", True),
        ("春节家里要来一大帮亲戚，住两三天", "family", True),
        ("my kiln tops out at cone 6, electric", "crafts", True),
        # an older user's age matters to care and medicines; someone else's does not
        ("I'm 68", "health", True),
        ("我今年73岁了", "health", True),
        ("给70岁的老人买什么礼物", "health", False),
        # money lost at cards, a workbook's exercises, a match streamed, a log looked for, a
        # holiday's homework
        ("Lost 30 pounds at the poker table on Friday", "fitness", False),
        ("What exercises suit a beginner learning Spanish grammar?", "fitness", False),
        ("Where can I watch the final online?", "place", False),
        ("我在哪里可以看到这个报错的日志", "place", False),
        ("孩子暑假作业太多了", "travel", False),
        ("Which carrier has the best coverage out in rural areas?", "where_to_live", False),
        # a phone plan is no set meal; a dog called Potato walked is no food
        ("帮我对比一下几家运营商给学生的套餐", "food", False),
        ("晚饭后带土豆遛一个小时", "food", False),
        ("土豆丝怎么炒才脆", "food", True),
        # a dish cooked and a cat kept grow nothing
        ("番茄炒蛋要先放蛋还是先放番茄", "garden", False),
        ("养猫要注意什么", "garden", False),
        # words the readings above also take, used for other things: a script that runs, a
        # phone's signal where one would move, a bloated bundle, a range extender, a
        # bookshop, May's weather, a flight site, a tokenizer's vocab, a judo grade, a
        # haircut, a weak point, a neighbour downstairs, motivation fuelled, an email's
        # sentences, a cat called Pumpkin, a stroll, tea ordered once, homework, streaming,
        # a course online
        ("My long-running script leaks memory", "crafts", False),
        ("a regular script that runs via cron", "coding", True),
        ("想搬去手机信号好、离地铁近的小区", "where_to_live", True),
        ("The bundle is bloated", "food", False),
        ("WiFi range extender keeps dropping", "vehicles", False),
        ("周末去先锋书店", "sports", False),
        ("五月天气怎么样", "music", False),
        ("Find cheap flights on Kayak", "exertion", False),
        ("The tokenizer vocab is too big", "language_learning", False),
        ("I'm 3 kyu in judo", "games", False),
        ("五五分发型适合我吗", "money", False),
        ("沟通是我的弱项", "study", False),
        ("我同事住我家楼下", "food", False),
        ("How do I fuel my motivation?", "food", False),
        ("帮我写几句英文邮件", "language_learning", False),
        ("我养的猫叫南瓜", "garden", False),
        ("饭后去公园遛一圈", "pets", False),
        ("遛完狗回来想做早餐", "food", True),
        ("会员日的双人套餐", "food", True),
        ("三个人点了三杯奶茶", "sleep", False),
        ("暑假还剩一周，作业没写完", "travel", False),
        ("Where can I watch Hamilton on Disney+?", "place", False),
        ("Where can I learn Rust? good courses", "place", False),
    ],
)
def test_a_topic_is_what_a_text_is_about(
    policy: Policy, text: str, topic: str, about: bool
) -> None:
    from gateway.memory.policy import topics_of

    assert (topic in topics_of(text, policy)) is about


def test_a_word_of_the_answers_is_no_standing_wish_in_a_fact(policy: Policy) -> None:
    from gateway.memory.policy import derive_applies, derive_slot

    text = "old iPhone 8, storage always full"
    slot = derive_slot(text, policy, "profile")
    assert derive_applies(text, policy, "profile", slot, "global") == "relevant"


def test_a_topic_lists_each_keyword_once() -> None:
    overlay = "topics:\n  - name: travel\n    keywords: [flight, hotel, Flight]\n"
    with pytest.raises(
        PolicyError, match=r"topics\[0\]\.keywords\[2\]: keyword 'Flight' is listed twice"
    ):
        parse_policy(overlay, "overlay.yaml")


def test_a_projects_plans_are_of_types_the_policy_names() -> None:
    with pytest.raises(
        PolicyError, match=r"recall\.relevance\.project_plans: unknown memory type 'wish'"
    ):
        parse_policy("recall:\n  relevance:\n    project_plans: [plan, wish]\n", "overlay.yaml")


def test_a_change_ends_only_slots_the_policy_names() -> None:
    with pytest.raises(PolicyError, match=r"changes\.ends_slots\[0\]: unknown slot 'dieet'"):
        parse_policy("changes:\n  ends_slots: [dieet]\n", "overlay.yaml")


def test_a_things_names_and_someones_end_are_checked() -> None:
    overlay = "changes:\n  same_things: [[aspirin], [Aspirin, 阿司匹林]]\n"
    with pytest.raises(PolicyError) as info:
        parse_policy(overlay, "overlay.yaml")
    assert "changes.same_things[0]: a thing needs two names or more" in str(info.value)
    assert "changes.same_things[1][0]: 'Aspirin' names another thing too" in str(info.value)
    overlay = "changes:\n  ends_someone:\n    - regex: '(?P<who>[A-Z'\n"
    with pytest.raises(PolicyError, match=r"changes\.ends_someone\[0\]\.regex: "):
        parse_policy(overlay, "overlay.yaml")
    overlay = "changes:\n  ends_someone:\n    - regex: '([A-Z][a-z]+) died'\n"
    with pytest.raises(PolicyError, match=r"changes\.ends_someone\[0\]\.regex: name whose end"):
        parse_policy(overlay, "overlay.yaml")


def test_a_jobs_trade_gives_its_memory_no_other_topic(policy: Policy) -> None:
    from gateway.memory.policy import derive_slot, memory_topics

    for text in ("UX designer at a health-tech startup", "在一家制药公司做 HR"):
        slot = derive_slot(text, policy, "profile")
        assert slot == "job"
        assert memory_topics(text, policy, "profile", slot) == ["work"]
    # what the memory says beside the job keeps its topic
    text = "I'm a freelancer so my income is pretty irregular month to month"
    assert "money" in memory_topics(text, policy, "profile", derive_slot(text, policy, "profile"))


def test_where_the_user_is_a_memory_says_by_its_patterns_not_the_weather(
    policy: Policy,
) -> None:
    """The weather words that make a request about where the user lives (``place``) do not
    make a memory about it: a headache that comes with the weather is a health fact. Where
    the user lives or will be, and how they take a climate, still are."""
    from gateway.memory.policy import memory_topics, topics_of

    assert "place" in topics_of("明天天气怎么样，要不要带伞", policy)
    headache = "我有偏头痛，天气一变就犯。"
    assert "place" not in memory_topics(headache, policy, "profile", None)
    assert "health" in memory_topics(headache, policy, "profile", None)
    assert "place" not in memory_topics("计划明年冬天去冰岛看极光", policy, "plan", None)
    assert "place" not in memory_topics("我女儿在新加坡国大读研", policy, "profile", None)
    for text, kind in (
        ("Flying to Porto tomorrow for 12 days", "plan"),
        ("在德国亚琛交换一学期", "profile"),
        ("我特别怕冷，冬天出门都得裹上羽绒服", "profile"),
    ):
        assert "place" in memory_topics(text, policy, kind, None), text
    assert "place" in memory_topics("我住台南", policy, "profile", "location")


def test_the_start_of_a_month_already_past_names_its_end(policy: Policy) -> None:
    """ "这个月初" said on the 25th is a start already behind: the plan holds until the month
    ends, not until a day already gone (which would end it as it is saved)."""
    late = datetime(2027, 5, 25, 12, tzinfo=UTC)
    early = datetime(2027, 5, 2, 12, tzinfo=UTC)
    text = "这个月初要交开题报告"
    assert policy.horizons.until(text, "plan", late) == datetime(2027, 6, 1, tzinfo=UTC)
    assert policy.horizons.until(text, "plan", early) == datetime(2027, 5, 11, tzinfo=UTC)


def test_the_start_of_next_month_said_in_december_is_januarys(policy: Policy) -> None:
    for day in (5, 31):
        saved = datetime(2027, 12, day, 12, tzinfo=UTC)
        until = policy.horizons.until("下个月初考四级", "plan", saved)
        assert until == datetime(2028, 1, 11, tzinfo=UTC)


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        ("我哋搬咗屋", "我们搬了屋"),
        ("俺有糖尿病", "我有糖尿病"),
        ("佢冇睇", "他没看"),
        ("幫我出五題化學題", "帮我出五题化学题"),
        ("关系很好", "关系很好"),
        ("俾斯麦统一了德国", "俾斯麦统一了德国"),
        ("小羊咩咩叫", "小羊咩咩叫"),
    ],
)
def test_spoken_cantonese_and_northern_words_read_as_mandarin(typed: str, read: str) -> None:
    """The rules are written in Mandarin; a few everyday words of spoken Cantonese and of the
    north fold into it, as Traditional characters fold into Simplified."""
    from gateway.memory.policy import normalize

    assert normalize(typed) == read


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("每周一、周三下午陪我妈去做针灸", 90),
        ("每个星期六上午带儿子上围棋课", 90),
        ("Choir practice every Thursday evening at the church hall", 90),
        ("Hydrotherapy on Mondays and Wednesdays", 90),
        # a date still ends it, routine or not
        ("这周三下午去复诊", 7),
        ("每周五打球，这周六去爬山", 7),
        ("Trumpet lessons every Tuesday until the end of the month", 28),
    ],
)
def test_a_weekly_routine_is_no_plan_of_this_week(policy: Policy, text: str, days: int) -> None:
    """A plan that comes back every week runs for a season; a weekday in its list ("每周一、
    周三") is no date of this week, which would end it seven days after it was saved."""
    saved = datetime(2027, 3, 3, 12, tzinfo=UTC)
    until = policy.horizons.until(text, "plan", saved)
    assert until is not None and (until - saved).days == days, until


@pytest.mark.parametrize(
    ("text", "memory_type", "slot"),
    [
        # a currency named with its country, by its code, or "when amounts come up"
        ("Please give all prices in Ghanaian cedis", "preference", "currency"),
        ("Budgets in KES, thanks", "preference", "currency"),
        ("报价一律用阿联酋迪拉姆", "preference", "currency"),
        ("说到花费的时候都用印度卢比", "preference", "currency"),
        ("I paid in Ghanaian cedis at the border", "profile", None),
        # a recipe's measures in Chinese units, or "written in grams"
        ("菜谱的用量写克，别写杯", "preference", "units"),
        ("Give me recipe amounts in 斤, I shop at the wet market", "preference", "units"),
        ("这个菜谱的分量写两人份", "preference", None),
        # a unit gone back to in Chinese, a Chinese unit asked for in English, both scales
        ("还是换回英里和磅吧，美国的App都这么显示", "preference", "units"),
        ("Use 斤 when you talk about weights", "preference", "units"),
        ("Give me temperatures in °F, my oven only shows those", "preference", "units"),
        ("早饭改成米粥", "preference", None),
        # a script of Chinese asked for
        (
            "Traditional Chinese is what I grew up with, answer in that please",
            "preference",
            "language",
        ),
        ("Can you write this sign in traditional characters?", "preference", None),
        # a long name asked for, or one set against the name not to use
        ("请叫我诸葛云飞，全名", "profile", "name"),
        ("别再叫我William了，叫Will就好", "profile", "name"),
        ("别再叫我帮忙了，叫小区物业吧", "profile", None),
        ("小狗每天六点就叫我起床遛它", "profile", None),
        # a project's charting library, said in lower case
        ("the farm dashboard's plots are made with seaborn", "project", "project_tool"),
        # the spreadsheet program now used, said without 表格
        ("换电脑以后现在用 Excel，WPS 卸了", "preference", "spreadsheet_app"),
        ("我平时用 WPS 写周报", "preference", None),
    ],
)
def test_slot_phrasings_of_both_languages(
    policy: Policy, text: str, memory_type: str, slot: str | None
) -> None:
    assert derive_slot(text, policy, memory_type) == slot


def test_a_spreadsheet_question_is_about_code_and_its_conditions_no_illness(policy: Policy) -> None:
    from gateway.memory.policy import topics_of

    assert "coding" in topics_of("透视表怎么按季度汇总？", policy)
    assert "health" not in topics_of("Write a formula with three conditions for the bonus", policy)
    assert "health" in topics_of("my dad has two conditions, gout and asthma", policy)


@pytest.mark.parametrize(
    ("text", "memory_type", "applies"),
    [
        # a tool the user codes in reaches coding requests, however it is worded; a wish
        # about the code written for the user stands
        ("我写代码一律用 Sublime Text", "preference", "relevant"),
        ("Always use pytest for the tests you write", "preference", "always"),
        # a habit while coding is no wish about answers; a wish while coding is
        ("写代码的时候我总爱听播客", "profile", "relevant"),
        ("写代码的时候请给完整的文件", "preference", "always"),
        # a sibling's need, the language spoken with a relative or one's blog is written in
        ("我弟弟有自闭症，去人多的地方会紧张", "profile", "relevant"),
        ("跟我外公打电话只能说潮汕话", "profile", "relevant"),
        ("I write my food blog in Italian", "profile", "relevant"),
        # ... while the user's own need and a language to answer in stand
        ("我有阅读障碍，请用短句", "accessibility", "always"),
        ("以后跟我说话用英文", "preference", "always"),
    ],
)
def test_what_applies_always_is_the_users_own_wish_about_answers(
    policy: Policy, text: str, memory_type: str, applies: str
) -> None:
    slot = derive_slot(text, policy, memory_type)
    assert derive_applies(text, policy, memory_type, slot, "global") == applies, slot
