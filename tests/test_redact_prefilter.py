"""``redact`` skips a secret pattern when the text lacks the literals every match of it holds
(a speed-up: the patterns cost half a microsecond a character). These tests hold it to the
plain version, which always substitutes, on texts built to sit at the pre-check's edges:
every literal and word, in every case, the characters that match ignoring case without
lowering to the ASCII letter ("ſ" for s, "ı" for i, "K" the Kelvin sign), mixed with noise."""

from __future__ import annotations

import random

from agents_app.llm import gateway
from agents_app.llm.gateway import _ASSIGNED, _SECRET, redact
from common import secret_keys


def plain_redact(text: str, secrets: list[str]) -> str:
    """``redact`` as it was before the pre-check: every substitution, always."""
    if not text:
        return text
    for value in secrets:
        text = text.replace(value, "[redacted]")
    text = _ASSIGNED.sub(r"\1[redacted]", text)
    return secret_keys.mask_known(_SECRET.sub("[redacted]", text))


PIECES = [
    "sk-", "sk-abcdefgh12345", "AIza" + "B" * 22, "Bearer abcdefghijklmnop", "BEARER  tok.en-123456789",
    "bEaReR xyzxyzxyzxyz12", "AKIA" + "ABCDEFGHIJKLMNOP", "ASIA" + "Z" * 16, "ghp_" + "a" * 31,
    "gho_", "ghs_" + "b" * 30, "github_pat_" + "c" * 22, "xoxb-1234567890", "xoxp-",
    "secret", "SECRET_KEY = 'abcdefgh'", "ſecret: abcdefgh", "ſECRET=abcdefghij",
    "passwd=hunter22", "PASSWORD: 'correcthorse'", "paſſword=abcdefg", "token: abcdefghi",
    "TOKEN=", "toKen = zzzzzzz", "api_key=abcdefgh", "API-KEY: qwertyui", "apikey='12345678'",
    "access_key=abcdefgh", "ACCESS-KEY = abcdefgh", "private_key: abcdefghij",
    "prıvate_key=abcdefgh", "apı_key=abcdefgh", "api_\u212aey=abcdefgh", "to\u212aen=abcdefgh",
    "\u0130", "ß", "ﬆ", " ", "\n", "=", ": ", "'", '"', "abcdefgh", "12345678", "-----BEGIN "
    "RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----", "bearer", "key", "KEY",
    "plain prose about logs", "x" * 40,
]


def test_redact_matches_the_plain_version_on_edge_texts():
    rng = random.Random(17)
    secrets = ["envsecretvalue123"]
    for _ in range(4000):
        text = "".join(rng.choice(PIECES + ["envsecretvalue123"]) for _ in range(rng.randint(1, 6)))
        assert redact(text, secrets) == plain_redact(text, secrets), repr(text)


def test_each_piece_alone_and_in_prose_matches_the_plain_version():
    for piece in PIECES:
        for text in (piece, f"The config says {piece} here", piece.upper(), piece.lower()):
            assert redact(text, []) == plain_redact(text, []), repr(text)


def test_a_text_without_the_literals_skips_the_patterns(monkeypatch):
    calls = []

    class Spy:
        def __init__(self, pattern):
            self.pattern = pattern

        def sub(self, *args):
            calls.append(self.pattern.pattern)
            return self.pattern.sub(*args)

    monkeypatch.setattr(gateway, "_SECRET", Spy(_SECRET))
    monkeypatch.setattr(gateway, "_ASSIGNED", Spy(_ASSIGNED))
    assert redact("Collect the logs, then write a report.", []) == (
        "Collect the logs, then write a report.")
    assert calls == []
    assert redact("Authorization: Bearer abcdefghijklmnop", []) == "Authorization: [redacted]"
    assert calls == [_SECRET.pattern]
    assert redact("db password = hunter2hunter2", []) == "db password = [redacted]"
    assert calls[-1] == _ASSIGNED.pattern


def test_env_secrets_finds_what_the_name_pattern_finds(monkeypatch):
    names = ["A_API_KEY", "B_TOKEN", "C_SECRET", "D_SECRET_KEY", "E_PASSWORD", "F_TOKENS",
             "G_token", "H_PASSWORD_FILE", "I_API_KEY\n", "J_TOKEN_\n", "K_SECRET"]
    for i, name in enumerate(names):
        monkeypatch.setenv(name, f"value-{i:04d}-long")
    monkeypatch.setenv("L_TOKEN", "short")
    monkeypatch.setenv("M_TOKEN", "ünïcødé-välue")
    expected = sorted(value for name, value in __import__("os").environ.items()
                      if len(value) >= 8 and gateway._SECRET_ENV.search(name))
    found = sorted(gateway.env_secrets())
    assert found == expected
    assert "ünïcødé-välue" in found and "short" not in found
    assert "value-0008-long" in found and "value-0009-long" not in found  # "…_API_KEY\n"


# --- the memo of texts the patterns found nothing in ------------------------------------------
PROSE = "Collect the logs of the service, then write a report on the errors. " * 6  # > CLEAN_MIN


def test_long_texts_match_the_plain_version_the_first_time_and_again():
    rng = random.Random(23)
    secrets = ["envsecretvalue123"]
    for _ in range(1500):
        text = PROSE + "".join(rng.choice(PIECES + ["envsecretvalue123"])
                               for _ in range(rng.randint(0, 4)))
        want = plain_redact(text, secrets)
        assert redact(text, secrets) == want, repr(text)
        assert redact(text, secrets) == want, repr(text)  # the second time, maybe remembered
    # only texts the plain version leaves as they are are kept: none holds a secret
    assert gateway._clean and all(plain_redact(t, secrets) == t for t in gateway._clean)


def test_a_clean_text_is_scanned_once_and_a_secret_one_every_time(monkeypatch):
    monkeypatch.setattr(gateway, "_clean", set())
    scans = []
    real = gateway._redact_patterns
    monkeypatch.setattr(gateway, "_redact_patterns", lambda t: scans.append(t) or real(t))
    clean = PROSE + "token budget: the key figures are below."
    assert redact(clean, []) == clean and redact(clean, []) == clean
    assert len(scans) == 1 and clean in gateway._clean
    secret = PROSE + "api_key=abcdefghijkl"
    for _ in range(2):
        assert redact(secret, []).endswith("api_key=[redacted]")
    assert len(scans) == 3 and secret not in gateway._clean
    short = "a short prompt"
    redact(short, []), redact(short, [])
    assert len(scans) == 5 and short not in gateway._clean  # cheaper to scan than to keep


def test_a_remembered_text_still_loses_this_servers_secret_values(monkeypatch):
    monkeypatch.setattr(gateway, "_clean", set())
    text = PROSE + "the value is hosted-value-0123456789 today"
    assert redact(text, []) == text and text in gateway._clean
    # a secret set in the environment since: replaced before the memo is asked
    assert redact(text, ["hosted-value-0123456789"]) == PROSE + "the value is [redacted] today"


def test_the_memo_is_emptied_when_full(monkeypatch):
    monkeypatch.setattr(gateway, "_clean", set())
    monkeypatch.setattr(gateway, "_clean_chars", 0)
    monkeypatch.setattr(gateway, "CLEAN_CHARS", 3 * len(PROSE) + 10)
    texts = [f"{PROSE} part {i}" for i in range(7)]
    for text in texts:
        assert redact(text, []) == text
        assert sum(map(len, gateway._clean)) <= gateway.CLEAN_CHARS
        assert gateway._clean_chars == sum(map(len, gateway._clean))
    assert texts[-1] in gateway._clean and texts[0] not in gateway._clean
    huge = PROSE * 100  # larger than the whole memo: never kept, and empties nothing
    assert redact(huge, []) == huge and huge not in gateway._clean
    assert texts[-1] in gateway._clean
