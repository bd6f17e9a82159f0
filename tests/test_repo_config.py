"""``.quorum.toml`` (reviews_app/hosting/repo_config.py): defaults, what each broken part
costs (only itself, with a plain note), the limits, globs and models per role."""

from __future__ import annotations

import json
import random

import pytest

from reviews_app.hosting.repo_config import MAX_BYTES, RepoConfig, glob_match, glob_problem, load

ALLOWED = {"server/default", "repo/allowed"}


def cfg(text: str | bytes, allowed=ALLOWED):
    return load(text.encode() if isinstance(text, str) else text, allowed_models=allowed)


def test_missing_or_empty_file_gives_the_defaults_without_a_note():
    assert load(None) == (RepoConfig(), [])
    config, notes = cfg("")
    assert config == RepoConfig() and notes == []
    assert config.included("any/path.py") and config.mode_for("a.py") is None
    assert config.stored()["publish"] == {"policy": None, "min_severity": None,
                                          "min_confidence": None}


def test_a_full_valid_file():
    config, notes = cfg('''
[review]
include = ["src/**", "tests/"]
exclude = ["*.lock", "src/vendor/**"]
heavy = ["src/core/**"]
light = ["tests/**"]
min_severity = "medium"
min_confidence = 0.6

[models]
security = "repo/allowed"

[[rules]]
text = "  Every query goes through db.query().  "
path_glob = "src/**"
severity = "high"

[[rules]]
text = "No print calls."

[publish]
policy = "automatic"
min_confidence = 0.9
''')
    assert notes == []
    assert config.included("src/app.py") and config.included("tests/a/b.py")
    assert not config.included("docs/x.md") and not config.included("src/deep/poetry.lock")
    assert not config.included("src/vendor/lib.py")
    assert config.mode_for("src/core/x.py") == "heavy" and config.mode_for("tests/t.py") == "light"
    assert config.mode_for("src/other.py") is None
    assert config.models == {"security": "repo/allowed"}
    assert config.rules_option() == [
        {"text": "Every query goes through db.query().", "scope": "path", "path_glob": "src/**",
         "severity": "high"},
        {"text": "No print calls.", "scope": "repository", "path_glob": "**",
         "severity": "medium"}]
    stored = config.stored()
    # [publish] wins; what it leaves out falls back to [review].
    assert stored["publish"] == {"policy": "automatic", "min_severity": "medium",
                                 "min_confidence": 0.9}


@pytest.mark.parametrize("data, words", [
    (b"[review\n", "is not valid TOML"),
    (b"a = 1\na = 2\n", "is not valid TOML"),
    (b"[review]\x00\n", "contains NUL bytes"),
    (b"\xff\xfe[review]\n", "is not UTF-8 text"),
    (b"#" * (MAX_BYTES + 1), f"over the {MAX_BYTES:,}-byte limit"),
    (b"[" * 5000, "not valid TOML"),
])
def test_an_unreadable_file_gives_all_defaults_and_one_note(data, words):
    config, notes = load(data)
    assert config == RepoConfig()
    assert len(notes) == 1 and words in notes[0] and "the defaults apply" in notes[0]


def test_a_file_at_the_size_limit_is_read():
    data = b'[review]\nexclude = ["docs/**"]\n'
    data += b"#" * (MAX_BYTES - len(data))
    config, notes = load(data)
    assert notes == [] and config.review.exclude == ["docs/**"]


def test_unknown_sections_and_keys_cost_only_themselves():
    config, notes = cfg('''
verbose = true
[review]
exclude = ["docs/**"]
exclud = ["oops/**"]
[publish]
policy = "never"
when = "always"
''')
    assert config.review.exclude == ["docs/**"] and config.publish.policy == "never"
    assert any("unknown section 'verbose'" in n for n in notes)
    assert any("[review] has an unknown key 'exclud'" in n for n in notes)
    assert any("[publish] has an unknown key 'when'" in n for n in notes)
    assert len(notes) == 3


@pytest.mark.parametrize("line, words", [
    ('include = "src/**"', "should be a list of globs"),
    ("min_severity = 3", "should be one of critical, high, medium, low, info"),
    ('min_severity = "huge"', "should be one of"),
    ("min_confidence = 1.5", "should be a number from 0 to 1"),
    ('min_confidence = "high"', "should be a number from 0 to 1"),
    ("min_confidence = true", "should be a number from 0 to 1"),
])
def test_a_wrong_type_keeps_that_keys_default(line, words):
    config, notes = cfg(f'[review]\nexclude = ["a/**"]\n{line}\n')
    assert config.review.exclude == ["a/**"]  # the rest of the section stands
    [note] = notes
    assert words in note and "the default applies" in note
    assert config.review.include == [] and config.review.min_severity is None
    assert config.review.min_confidence is None


def test_case_and_integers_are_accepted_where_unambiguous():
    config, notes = cfg('[review]\nmin_severity = "HIGH"\nmin_confidence = 1\n'
                        '[publish]\npolicy = "Never"\n')
    assert notes == [] and config.review.min_severity == "high"
    assert config.review.min_confidence == 1.0 and config.publish.policy == "never"


@pytest.mark.parametrize("glob, why", [
    ("", "is empty"), ("/etc/**", "absolute path"), ("C:/x", "absolute path"),
    ("../up/**", '".."'), ("src\\x.py", "backslash"), ("a[bc", 'has a "["'),
    ("a\x01b", "control characters"), ("x" * 301, "longer than 300"), (3, "is not a text"),
])
def test_bad_globs_are_ignored_with_a_note(glob, why):
    assert why in glob_problem(glob)
    value = json.dumps(glob)  # a JSON string or number is a TOML one too
    config, notes = cfg(f'[review]\nexclude = [{value}, "ok/**"]\n')
    assert config.review.exclude == ["ok/**"] and len(notes) == 1 and why in notes[0]
    assert "it was ignored" in notes[0]
    if isinstance(glob, str):
        assert not glob_match(glob, "a/b") and not glob_match(glob, glob)


def test_glob_matching():
    cases = [("*.lock", "poetry.lock", True), ("*.lock", "a/b/yarn.lock", True),
             ("docs/", "docs/a/b.md", True), ("docs/", "mydocs/a.md", False),
             ("src/*.py", "src/a.py", True), ("src/*.py", "src/x/a.py", False),
             ("src/**/*.py", "src/a.py", True), ("src/**/*.py", "src/x/y/a.py", True),
             ("src/**", "src/x/y", True), ("src/**", "srcx/y", False),
             ("[ab].py", "b.py", True), ("[!ab].py", "a.py", False), ("?.py", "ab.py", False),
             ("a+b(c).py", "a+b(c).py", True), ("**", "anything/at/all", True),
             ("*.py", "a.py\n", False)]
    for glob, path, want in cases:
        assert glob_match(glob, path) is want, (glob, path)


def test_too_many_globs_are_cut_with_a_note():
    globs = ", ".join(f'"d{i}/**"' for i in range(250))
    config, notes = cfg(f"[review]\nexclude = [{globs}]\n")
    assert len(config.review.exclude) == 200 and "only the first 200" in notes[0]


def test_models_only_for_review_roles_and_allowed_models():
    config, notes = cfg('[models]\nsecurity = "repo/allowed"\nstyle = "costly/model"\n'
                        'planner = "repo/allowed"\narchitecture = ""\nsynthesizer = 5\n')
    assert config.models == {"security": "repo/allowed"}
    text = "\n".join(notes)
    assert "'costly/model' is not a model this server allows" in text
    assert "unknown role 'planner'" in text
    assert "architecture = '' should be a model name" in text
    assert "synthesizer = 5 should be a model name" in text
    config, notes = cfg("models = 3\n")
    assert config.models == {} and "[models] should be a table" in notes[0]


def test_rules_edge_cases():
    config, notes = cfg('''
[[rules]]
text = ""
[[rules]]
text = "Scoped wrongly"
path_glob = "../x"
[[rules]]
text = "Fine but odd severity"
severity = "urgent"
colour = "red"
[[rules]]
text = "%s"
''' % ("y" * 2001))
    assert [r.text for r in config.rules] == ["Fine but odd severity"]
    assert config.rules[0].severity == "medium"
    text = "\n".join(notes)
    assert "Rule 1 has no text" in text and "Rule 2: the path_glob '../x'" in text
    assert "Rule 3: severity = 'urgent'" in text and "unknown key(s) 'colour'" in text
    assert "Rule 4's text is longer than 2000" in text
    config, notes = cfg("rules = 5\n")
    assert config.rules == [] and "[[rules]] tables" in notes[0]
    many = "\n".join(f'[[rules]]\ntext = "r{i}"' for i in range(60))
    config, notes = cfg(many)
    assert len(config.rules) == 50 and "only the first 50" in notes[0]


def test_a_section_that_is_not_a_table():
    config, notes = cfg('review = "all"\npublish = 1\n')
    assert config == RepoConfig() and len(notes) == 2
    assert "[review] should be a table" in notes[0]


def test_notes_are_capped_and_values_shown_short_and_printable():
    lines = "\n".join(f"k{i} = 1" for i in range(40))
    config, notes = cfg("[review]\n" + lines)
    assert len(notes) == 31 and notes[-1] == "… and 10 more problems."
    config, notes = cfg('[review]\nmin_severity = "' + "\\u0007" * 5 + "z" * 200 + '"\n')
    assert "\x07" not in notes[0] and len(notes[0]) < 200


def test_random_bytes_never_raise():
    rng = random.Random(15)
    pieces = [b"[review]", b"[[rules]]", b"[models]", b"[publish]", b"include = [", b'"a/**"',
              b"]", b"\n", b"=", b"text = ", b"1", b"true", b"\xff", b"{", b"}", b'"', b"."]
    for _ in range(500):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        config, notes = load(data, allowed_models=ALLOWED)
        assert isinstance(config, RepoConfig) and all(isinstance(n, str) for n in notes)


def test_the_readme_example_reads_without_a_note():
    """The README's .quorum.toml example stays true to the schema."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    example = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    cfg, notes = load(example.encode(), allowed_models={"gpt-4o"})
    assert notes == []
    assert cfg.review.exclude == ["docs/**", "*.lock"] and cfg.publish.policy == "after_triage"
    assert cfg.models == {"security": "gpt-4o"} and cfg.rules[0].severity == "high"
