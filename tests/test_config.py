"""Specification of dlm_lsp.config: camelCase JSON in, typed settings out, problems as sentences."""

from __future__ import annotations

import dataclasses
import json

import pytest

from dlm_lsp.config import InfillOptions, ServerConfig, camel, from_json, snake, to_json

# --- names on the wire --------------------------------------------------------------------


@pytest.mark.parametrize(("snake_name", "camel_name"), [
    ("model", "model"),
    ("max_span_tokens", "maxSpanTokens"),
    ("steps_single_line", "stepsSingleLine"),
    ("latency_ms", "latencyMs"),
])
def test_camel_and_snake_convert_field_names_both_ways(snake_name: str, camel_name: str) -> None:
    assert camel(snake_name) == camel_name
    assert snake(camel_name) == snake_name


@pytest.mark.parametrize("cls", [ServerConfig, InfillOptions])
def test_every_field_name_survives_a_camel_snake_round_trip(cls: type) -> None:
    for f in dataclasses.fields(cls):
        assert snake(camel(f.name)) == f.name


# --- reading settings ---------------------------------------------------------------------


def test_none_gives_the_defaults_without_problems() -> None:
    assert from_json(ServerConfig, None) == (ServerConfig(), [])


def test_camel_case_keys_set_the_matching_fields() -> None:
    cfg, problems = from_json(ServerConfig, {"maxSpanTokens": 64, "holeMarker": "??",
                                             "drafts": True})
    assert problems == []
    assert (cfg.max_span_tokens, cfg.hole_marker, cfg.drafts) == (64, "??", True)


def test_a_latency_target_for_every_kind_is_a_setting() -> None:
    """`latencyMs` was a request option only: as a setting it was an unknown key,
    ignored, and a user had to set latencyMsSingleLine, ...MultiLine and ...Rewrite."""
    assert from_json(ServerConfig, {"latencyMs": 300}) == (ServerConfig(latency_ms=300), [])


def test_fields_not_mentioned_keep_their_defaults() -> None:
    cfg, _ = from_json(ServerConfig, {"strategy": "margin"})
    assert cfg == dataclasses.replace(ServerConfig(), strategy="margin")


def test_wrong_type_keeps_the_default_and_names_the_setting() -> None:
    cfg, problems = from_json(ServerConfig, {"maxSpanTokens": "lots"})
    assert cfg.max_span_tokens == ServerConfig().max_span_tokens
    assert len(problems) == 1
    assert "'maxSpanTokens'" in problems[0] and "wrong type" in problems[0]


@pytest.mark.parametrize(("data", "problem"), [
    ({"steps": "8"}, "setting 'steps' = \"8\" has the wrong type: it should be an integer from "
                     "1 to 4096; default kept"),
    ({"strategy": 1}, "setting 'strategy' = 1 has the wrong type: it should be one of "
                      "confidence, margin, entropy, random, left-to-right; default kept"),
    ({"drafts": "true"}, "setting 'drafts' = \"true\" has the wrong type: it should be true or "
                         "false; default kept"),
    ({"earlyStop": 0}, "setting 'earlyStop' = 0 has the wrong type: it should be true or "
                       "false; default kept"),
    ({"remoteToken": 5}, "setting 'remoteToken' = (hidden) has the wrong type: it should be a "
                         "string of visible ASCII characters without spaces; default kept"),
    ({"timeoutMs": 1.5}, "setting 'timeoutMs' = 1.5 has the wrong type: it should be a positive "
                         "integer of milliseconds, at most 86400000 (a day); default kept"),
])
def test_a_value_of_the_wrong_type_says_what_the_setting_accepts(data, problem) -> None:
    """"has the wrong type ('8')" left the user guessing what the right one is."""
    assert from_json(ServerConfig, data) == (ServerConfig(), [problem])


def test_a_token_an_http_header_cannot_carry_is_refused_without_showing_it() -> None:
    """A "€" in remoteToken made every fill fail as a broken connection, tried again; the
    problem is said without the token, as a message an editor shows must be."""
    assert from_json(ServerConfig, {"remoteToken": "€uro-secret"}) == (ServerConfig(), [
        "setting 'remoteToken' = (hidden) should be a string of visible ASCII characters "
        "without spaces; default kept"])
    assert from_json(ServerConfig, {"remoteToken": "a-b_c.d~e+f/g="})[1] == []


@pytest.mark.parametrize("marker", ["\n", "\r", "<FILL>\r", "a\r\nb", "", "\t", "  ", " \n "])
def test_a_hole_marker_holding_a_line_break_or_only_blanks_is_refused(marker: str) -> None:
    """LSP breaks lines at \\r as at \\n: a marker "\\r" was taken, and in a CRLF file
    "fill holes" replaced the first half of every line break, an edit ending past its line.
    A marker "\\t" made every tab of a tab-indented file a hole."""
    assert from_json(ServerConfig, {"holeMarker": marker}) == (ServerConfig(), [
        f"setting 'holeMarker' = {json.dumps(marker)} should be a string without a line "
        "break, not empty nor whitespace alone; default kept"])
    assert from_json(ServerConfig, {"holeMarker": " <HOLE>\t"})[1] == []  # blanks beside


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(ServerConfig)])
def test_every_setting_says_what_it_accepts_when_given_the_wrong_type(field: str) -> None:
    wrong = [{"nested": 1}] if field != "model" else 5  # no setting takes a list
    _, [problem] = from_json(ServerConfig, {camel(field): wrong})
    assert problem.startswith(f"setting '{camel(field)}' = ")
    assert " has the wrong type: it should be " in problem and problem.endswith("default kept")
    assert not problem.split("should be ")[1].startswith(";")  # words, not nothing


@pytest.mark.parametrize(("data", "words"), [
    ({"maxContextTokens": 2**21}, "an integer from 0 to 1048576"),  # said "non-negative"
    ({"latencyMsSingleLine": 0}, "a positive integer of milliseconds, at most 3600000 (an "
                                 "hour)"),  # 150.5 is refused
    ({"remoteConnectMs": -1}, "a positive integer of milliseconds, at most 3600000 (an hour)"),
])
def test_a_refused_value_is_told_the_range_that_is_really_accepted(data, words) -> None:
    _, [problem] = from_json(ServerConfig, data)
    assert f"should be {words}; default kept" in problem


@pytest.mark.parametrize(("name", "largest"), [
    ("latencyMs", 3_600_000), ("latencyMsRewrite", 3_600_000), ("timeoutMs", 86_400_000),
    ("remoteConnectMs", 3_600_000), ("maxPerStep", 4096), ("blockSize", 4096)])
def test_settings_that_had_no_upper_bound_have_one(name, largest) -> None:
    """A latency target of 400 digits was accepted, and every fill then failed with an
    OverflowError; a connection timeout of 10**13 ms raised one the remote fallback did
    not catch.  Every number now has a largest value, which its message names."""
    assert from_json(ServerConfig, {name: largest})[1] == []
    _, [problem] = from_json(ServerConfig, {name: 10 ** 400})
    assert f"at most {largest}" in problem or f"to {largest}" in problem


def test_out_of_range_value_keeps_the_default_and_says_what_is_allowed() -> None:
    cfg, problems = from_json(ServerConfig, {"candidates": 17})
    assert cfg.candidates == ServerConfig().candidates
    assert problems == ["setting 'candidates' = 17 should be an integer from 1 to 16; default kept"]


def test_unknown_choice_of_strategy_is_refused() -> None:
    cfg, problems = from_json(ServerConfig, {"strategy": "fastest"})
    assert cfg.strategy == "confidence"
    assert len(problems) == 1 and "left-to-right" in problems[0]


def test_unknown_key_is_reported_and_ignored() -> None:
    cfg, problems = from_json(ServerConfig, {"fillWidth": 3})
    assert cfg == ServerConfig()
    assert problems == ["unknown setting 'fillWidth' ignored"]


@pytest.mark.parametrize(("key", "meant"), [("step", "steps"), ("temprature", "temperature"),
                                            ("stepsSingleLin", "stepsSingleLine"),
                                            ("contextcache", "contextCache")])
def test_a_misspelt_setting_is_told_the_name_it_is_near(key: str, meant: str) -> None:
    """`step` and `temprature` were "unknown" and no more: the user searched the table
    for the one letter.  A name far from every setting gets no guess."""
    cfg, problems = from_json(ServerConfig, {key: 3})
    assert cfg == ServerConfig()
    assert problems == [f"unknown setting '{key}' (did you mean '{meant}'?) ignored"]
    assert from_json(ServerConfig, {"colour": 3}, strict=True)[1] == [
        "unknown setting 'colour'"]


def test_null_is_the_default_even_where_the_default_is_not_null() -> None:
    changed = dataclasses.replace(ServerConfig(), early_stop=False, strategy="margin",
                                  steps=4, model="/models/x")
    cfg, problems = from_json(ServerConfig, {"earlyStop": None, "strategy": None,
                                             "steps": None, "model": None}, changed)
    assert problems == []
    assert (cfg.early_stop, cfg.strategy, cfg.steps, cfg.model) == (True, "confidence", None,
                                                                     "default")


def test_null_in_request_options_leaves_the_choice_to_the_server() -> None:
    opts, problems = from_json(InfillOptions, {"earlyStop": None, "strategy": None})
    assert problems == [] and opts == InfillOptions()


def test_a_bad_change_keeps_the_current_value_and_says_so() -> None:
    current = dataclasses.replace(ServerConfig(), candidates=3)
    cfg, problems = from_json(ServerConfig, {"candidates": 17}, current)
    assert cfg.candidates == 3
    assert problems == ["setting 'candidates' = 17 should be an integer from 1 to 16; "
                        "previous value kept"]


def test_a_wrong_value_sent_again_unchanged_is_applied_as_ever_but_not_told_again() -> None:
    """Editors send the whole section at every change: `said` is what was sent before."""
    current = dataclasses.replace(ServerConfig(), candidates=3)
    said = {"candidates": 17, "strategy": "sideways", "bogus": 1, "seed": 5}
    cfg, problems = from_json(ServerConfig, {**said, "seed": 7}, current, said=said)
    assert problems == []
    assert (cfg.candidates, cfg.strategy, cfg.seed) == (3, "confidence", 7)


def test_a_wrong_value_that_changed_is_told_even_if_one_was_before() -> None:
    said = {"candidates": 17, "steps": 1}
    _, problems = from_json(ServerConfig, {"candidates": 18, "steps": 0, "bogus": 1},
                            ServerConfig(), said=said)
    assert problems == [
        "setting 'candidates' = 18 should be an integer from 1 to 16; previous value kept",
        "setting 'steps' = 0 should be an integer from 1 to 4096; previous value kept",
        "unknown setting 'bogus' ignored"]


@pytest.mark.parametrize(("before", "now"), [(1, True), (0, False), (1, 1.0), ([1], [True])])
def test_values_python_finds_equal_are_different_values_of_a_setting(before, now) -> None:
    """steps = true after steps = 1 is a new (wrong) value, though True == 1."""
    _, problems = from_json(ServerConfig, {"steps": now}, ServerConfig(), said={"steps": before})
    assert len(problems) == 1 and f"= {json.dumps(now)} has the wrong type" in problems[0]


def test_settings_that_are_not_an_object_are_told_once() -> None:
    _, problems = from_json(ServerConfig, [1, 2], said=[1, 2])
    assert problems == []
    _, problems = from_json(ServerConfig, [1, 3], said=[1, 2])
    assert problems == ["settings should be an object, got an array; ignored"]


def test_strict_problems_do_not_claim_the_value_was_ignored() -> None:
    _, problems = from_json(InfillOptions, {"bogus": 1, "steps": 0}, where="options", strict=True)
    assert problems == ["unknown setting 'options.bogus'",
                        "setting 'options.steps' = 0 should be an integer from 1 to 4096"]


@pytest.mark.parametrize(("data", "kind"), [([1, 2], "an array"), ("steps", "a string"),
                                            (3, "a number"), (True, "true")])
def test_data_that_is_not_an_object_is_reported_and_defaults_kept(data: object,
                                                                  kind: str) -> None:
    """Named as the user knows it, in JSON's words: the message said "ServerConfig should
    be an object", then "got list"."""
    cfg, problems = from_json(ServerConfig, data)
    assert cfg == ServerConfig()
    assert problems == [f"settings should be an object, got {kind}; ignored"]
    _, problems = from_json(InfillOptions, data, where="options", strict=True)
    assert problems == [f"options should be an object, got {kind}"]


def test_problems_are_labelled_with_where_the_settings_came_from() -> None:
    _, problems = from_json(ServerConfig, {"bogus": 1, "steps": 0}, where="dlm")
    assert "'dlm.bogus'" in problems[0]
    assert "'dlm.steps'" in problems[1]


def test_each_bad_value_is_reported_while_good_ones_apply() -> None:
    cfg, problems = from_json(ServerConfig, {"steps": 0, "seed": 7, "device": "tpu"})
    assert cfg.seed == 7
    assert (cfg.steps, cfg.device) == (None, "auto")
    assert len(problems) == 2


@pytest.mark.parametrize(("cls", "key"), [(ServerConfig, "temperature"),
                                          (InfillOptions, "temperature")])
def test_int_is_accepted_for_a_float_field_and_stored_as_float(cls: type, key: str) -> None:
    obj, problems = from_json(cls, {key: 1})
    assert problems == []
    assert obj.temperature == 1.0 and isinstance(obj.temperature, float)


@pytest.mark.parametrize("key", ["steps", "maxSpanTokens", "seed"])
def test_bool_is_refused_for_an_int_field(key: str) -> None:
    cfg, problems = from_json(ServerConfig, {key: True})
    assert getattr(cfg, snake(key)) == getattr(ServerConfig(), snake(key))
    assert len(problems) == 1 and "wrong type" in problems[0]


def test_bool_is_refused_for_a_float_field() -> None:
    cfg, problems = from_json(ServerConfig, {"temperature": False})
    assert cfg.temperature == 0.0 and len(problems) == 1


def test_float_is_refused_for_an_int_field() -> None:
    cfg, problems = from_json(ServerConfig, {"seed": 1.5})
    assert cfg.seed == 0 and len(problems) == 1


def test_null_is_accepted_for_an_optional_field() -> None:
    base = dataclasses.replace(ServerConfig(), steps=12)
    cfg, problems = from_json(ServerConfig, {"steps": None}, base)
    assert problems == [] and cfg.steps is None


def test_infill_options_default_to_none_meaning_use_the_server_setting() -> None:
    opts, problems = from_json(InfillOptions, {"length": 5})
    assert problems == []
    assert opts == InfillOptions(length=5)


def test_infill_option_range_checks_apply() -> None:
    opts, problems = from_json(InfillOptions, {"length": 0, "latencyMs": -1})
    assert opts == InfillOptions()
    assert len(problems) == 2


@pytest.mark.parametrize("cls", [ServerConfig, InfillOptions])
def test_a_seed_the_random_generator_cannot_take_is_refused(cls: type) -> None:
    """torch seeds take 64 bits, and repair rounds add their number to the seed: a larger
    seed was accepted and then failed every fill ("Overflow when unpacking long long")."""
    for seed in (2**64, 2**64 - 1, -(2**63) - 1):
        config, problems = from_json(cls, {"seed": seed})
        assert config.seed == cls().seed and len(problems) == 1 and "'seed'" in problems[0]
    for seed in (2**63 - 1, -(2**63), -5, 0):
        assert from_json(cls, {"seed": seed}) == (dataclasses.replace(cls(), seed=seed), [])


# --- overlaying and writing back ----------------------------------------------------------


def test_overlay_onto_a_base_keeps_the_base_fields_not_mentioned() -> None:
    base = dataclasses.replace(ServerConfig(), seed=42, strategy="entropy", drafts=True)
    cfg, problems = from_json(ServerConfig, {"seed": 3}, base)
    assert problems == []
    assert cfg == dataclasses.replace(base, seed=3)


def test_overlay_does_not_modify_the_base() -> None:
    base = ServerConfig()
    from_json(ServerConfig, {"seed": 3}, base)
    assert base == ServerConfig()


def test_bad_value_in_an_overlay_keeps_the_base_value_not_the_default() -> None:
    base = dataclasses.replace(ServerConfig(), max_span_tokens=64)
    cfg, problems = from_json(ServerConfig, {"maxSpanTokens": 0}, base)
    assert cfg.max_span_tokens == 64 and len(problems) == 1


def test_to_json_uses_camel_case_keys() -> None:
    data = to_json(ServerConfig())
    assert data["maxSpanTokens"] == 128
    assert "max_span_tokens" not in data


@pytest.mark.parametrize("obj", [
    ServerConfig(),
    ServerConfig(model="/m", device="cpu", steps=5, temperature=0.5, strategy="random",
                 schedule="cosine", hole_marker="@@", drafts=True, validate=False),
    InfillOptions(),
    InfillOptions(length=3, steps=2, strategy="margin", candidates=4, seed=9, temperature=1.5),
])
def test_to_json_round_trips_through_from_json(obj: object) -> None:
    back, problems = from_json(type(obj), to_json(obj))
    assert problems == []
    assert back == obj


@pytest.mark.parametrize(("key", "meant"), [("Steps", "steps"), ("early_stop", "earlyStop"),
                                            ("max_per_step", "maxPerStep")])
def test_a_setting_is_read_only_as_the_table_spells_it(key: str, meant: str) -> None:
    """`Steps` and `early_stop` were read as `steps` and `earlyStop`: of `steps` and
    `Steps` sent together, the last won without a word."""
    cfg, problems = from_json(ServerConfig, {key: 2, "seed": 3})
    assert (cfg.seed, problems) == (3, [
        f"unknown setting '{key}' (did you mean '{meant}'?) ignored"])
    cfg, _ = from_json(ServerConfig, {"steps": 2, "Steps": 6})
    assert cfg.steps == 2


@pytest.mark.parametrize(("value", "shown"), [(True, "true"), (None, "null"), ("8", '"8"'),
                                              ([1], "[1]"), (float("nan"), "NaN")])
def test_a_wrong_value_is_shown_as_json_spells_it(value: object, shown: str) -> None:
    """Python's spelling (`True`, `'8'`) is not what the user typed."""
    _, problems = from_json(InfillOptions, {"bogus": 1, "steps": value}, where="options",
                            strict=True)
    if value is None:  # null is the default, no problem
        assert problems == ["unknown setting 'options.bogus'"]
    else:
        assert problems[1].startswith(f"setting 'options.steps' = {shown} ")


def test_a_server_setting_in_a_request_s_options_is_named_as_one() -> None:
    """`options.timeoutMs` was an "unknown setting", though the user had read of it."""
    _, problems = from_json(InfillOptions, {"timeoutMs": 1, "bogus": 2}, where="options",
                            strict=True)
    assert problems == ["'options.timeoutMs' is a server setting, not an option of a request: "
                        "set it in the settings", "unknown setting 'options.bogus'"]
    _, said = from_json(InfillOptions, {"timeoutMs": 1}, where="options")  # not strict: goes on
    assert said == ["'options.timeoutMs' is a server setting, not an option of a request: set "
                    "it in the settings; ignored"]
