"""The redaction table: per-rule precision/recall on the corpus, RE2 compatibility, validators, order.

Expected values come from the hand-written corpus (tests/data/redaction), from published examples (payment
test cards, IBAN registry examples, the jwt.io token, AWS documentation keys) and hand calculation, never from
the code under test.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import re2

from serving import redaction
from serving.redaction import RULES, RULES_BY_NAME, Finding, redact, scan

DATA = Path(__file__).parent / "data" / "redaction"
POSITIVES = [json.loads(line) for line in (DATA / "positives.jsonl").read_text().splitlines() if line]
NEGATIVES = [json.loads(line) for line in (DATA / "negatives.jsonl").read_text().splitlines() if line]
ALL_TEXTS = [r["text"] for r in POSITIVES] + [r["text"] for r in NEGATIVES]
VALIDATED = {r.name for r in RULES if r.validator is not None}


def _expected_spans(record: dict) -> set[tuple[str, int, int]]:
    spans = set()
    for rule, value in record["expect"]:
        start = record["text"].find(value)
        while start != -1:
            spans.add((rule, start, start + len(value)))
            start = record["text"].find(value, start + 1)
    return spans


def _found(findings: list[Finding]) -> set[tuple[str, int, int]]:
    return {(f.rule, f.start, f.end) for f in findings}


def _intermediate_texts(text: str) -> list[str]:
    """The text each rule sees in the collector: the output of the rules before it (patterns only)."""
    texts = [text]
    for rule in RULES:
        texts.append(rule.regex.sub(rule.replacement, texts[-1]))
    return texts


def _scores(validate: bool) -> dict[str, tuple[int, int, int]]:
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    for record in POSITIVES + [{"text": r["text"], "expect": []} for r in NEGATIVES]:
        expected, got = _expected_spans(record), _found(scan(record["text"], validate=validate))
        for rule, *_ in got & expected:
            tp[rule] += 1
        for rule, *_ in got - expected:
            fp[rule] += 1
        for rule, *_ in expected - got:
            fn[rule] += 1
    return {r.name: (tp[r.name], fp[r.name], fn[r.name]) for r in RULES}


def test_corpus_covers_every_rule_and_its_values_are_in_the_text():
    per_rule = Counter(rule for record in POSITIVES for rule, _ in record["expect"])
    assert {r.name for r in RULES} == set(per_rule)
    assert min(per_rule.values()) >= 2, per_rule
    for record in POSITIVES:
        for _, value in record["expect"]:
            assert value in record["text"]
    assert len(NEGATIVES) >= 25


def test_precision_and_recall_per_rule(capsys):
    python, collector = _scores(validate=True), _scores(validate=False)
    lines = [f"{'rule':<20}{'n':>4}{'P':>7}{'R':>7}   collector, exact spans (patterns only){'P':>7}{'R':>7}"]
    for name, (tp, fp, fn) in python.items():
        ctp, cfp, cfn = collector[name]
        lines.append(f"{name:<20}{tp + fn:>4}{tp / max(tp + fp, 1):>7.2f}{tp / max(tp + fn, 1):>7.2f}"
                     f"{'':>42}{ctp / max(ctp + cfp, 1):>7.2f}{ctp / max(ctp + cfn, 1):>7.2f}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    for name, (tp, fp, fn) in python.items():
        assert fn == 0 and tp > 0, f"{name}: recall {tp}/{tp + fn}"
        assert fp == 0, f"{name}: {fp} false positives"


def test_no_false_positive_on_the_negative_set():
    for record in NEGATIVES:
        text = record["text"]
        assert scan(text) == [], (record["kind"], scan(text))
        assert redact(text) == (text, {})


def test_collector_over_redacts_only_where_a_validator_exists():
    """Patterns alone touch some negatives (a Luhn-invalid card number, an IBAN with bad check digits), but
    only through rules whose validator the collector cannot run; and the corpus says which ones."""
    touched = {(f.rule, f.value) for r in NEGATIVES for f in scan(r["text"], validate=False)}
    assert {rule for rule, _ in touched} <= VALIDATED
    assert ("credit_card", "4111 1111 1111 1112") in touched
    assert ("iban", "GB29NWBK60161331926818") in touched


def test_collector_never_leaks_what_python_redacts():
    """Every span Python redacts (validated) lies inside a span the patterns alone redact, and every expected
    value is covered by the collector's spans."""
    for record in POSITIVES + NEGATIVES:
        text = record["text"]
        collector = scan(text, validate=False)
        for f in scan(text):
            assert any(c.start <= f.start and f.end <= c.end for c in collector), (text, f)
        for rule, start, end in _expected_spans(record) if "expect" in record else ():
            assert any(c.start <= start and end <= c.end for c in collector), (text, rule)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_pattern_compiles_in_re2_and_finds_the_same_spans_as_python(rule):
    compiled = re2.compile(rule.pattern)
    for text in ALL_TEXTS:
        for seen in _intermediate_texts(text):
            python_spans = [m.span() for m in rule.regex.finditer(seen)]
            assert [m.span() for m in compiled.finditer(seen)] == python_spans, (rule.name, seen)


def test_re2_rejects_what_the_table_must_not_use():
    """The RE2 binding is a real check: it refuses look-around and back-references (it does not fall back)."""
    for unsupported in (r"(?<=a)b", r"(a)\1", r"a(?=b)"):
        with pytest.raises(re2.error):
            re2.compile(unsupported)


def test_replacement_tokens_match_no_rule():
    tokens = " ".join(r.replacement for r in RULES)
    for rule in RULES:
        assert rule.regex.search(tokens) is None, rule.name
        assert re2.compile(rule.pattern).search(tokens) is None, rule.name


def test_table_shape():
    assert len(RULES_BY_NAME) == len(RULES)
    for rule in RULES:
        assert rule.replacement == f"[REDACTED:{rule.name}]"
        assert rule.source and rule.pattern.isascii()
        assert "(?i)" not in rule.pattern and "\\s" not in rule.pattern and "\\d" not in rule.pattern


def test_mixed_vllm_log_line_is_redacted_exactly():
    line = ("INFO 10-02 14:03:11 [logger.py:41] Received request chatcmpl-7f3c2a: prompt: '<|user|>"
            "\\nI am Jane Roe, jane.roe@example.com, card 4242 4242 4242 4242, call +44 20 7946 0958 or "
            "(202) 555-0143. My key is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t and my IP is 203.0.113.9."
            "<|assistant|>', "
            "params: SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens=256), "
            "prompt_token_ids: [128000, 40, 1097], prompt_embeds shape: None, lora_request: None.")
    expected = ("INFO 10-02 14:03:11 [logger.py:41] Received request chatcmpl-7f3c2a: prompt: '<|user|>"
                "\\nI am Jane Roe, [REDACTED:email], card [REDACTED:credit_card], call "
                "[REDACTED:phone_intl] or [REDACTED:phone_nanp]. My key is [REDACTED:openai_key] and my IP "
                "is [REDACTED:ipv4]."
                "<|assistant|>', "
                "params: SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens=256), "
                "prompt_token_ids: [128000, 40, 1097], prompt_embeds shape: None, lora_request: None.")
    out, counts = redact(line)
    assert out == expected
    assert counts == {"email": 1, "credit_card": 1, "phone_intl": 1, "phone_nanp": 1, "openai_key": 1,
                      "ipv4": 1}


def test_card_followed_by_expiry_redacts_the_card_not_the_expiry():
    # The pattern swallows "... 1111 12" (18 digits, Luhn-invalid); Python keeps the valid 16-digit card.
    assert redact("card 4111 1111 1111 1111 12/29") == ("card [REDACTED:credit_card] 12/29",
                                                        {"credit_card": 1})
    assert redact("card 4111 1111 1111 1111 12/29", validate=False)[0] == "card [REDACTED:credit_card]/29"


# --- validators against published examples and hand calculation -------------------------------------------

PUBLISHED_TEST_CARDS = ["4111111111111111", "4242424242424242", "5555555555554444", "2223003122003222",
                        "378282246310005", "6011111111111117", "3566002020360505", "36227206271667",
                        "6200000000000005", "6205500000000000004", "4222222222222"]
IBAN_REGISTRY_EXAMPLES = ["GB29NWBK60161331926819", "DE89370400440532013000", "FR1420041010050500013M02606",
                          "NL91ABNA0417164300", "BE68539007547034", "CH9300762011623852957",
                          "NO9386011117947"]


@pytest.mark.parametrize("card", PUBLISHED_TEST_CARDS)
def test_luhn_accepts_published_test_cards_and_rejects_a_changed_last_digit(card):
    assert redaction.luhn_ok(card)
    for d in "0123456789":
        if d != card[-1]:
            assert not redaction.luhn_ok(card[:-1] + d)  # exactly one check digit is valid


@pytest.mark.parametrize("iban", IBAN_REGISTRY_EXAMPLES)
def test_mod97_accepts_registry_examples_and_rejects_swapped_digits(iban):
    assert redaction.iban_ok(iban)
    assert redaction.iban_ok(" ".join(iban[i:i + 4] for i in range(0, len(iban), 4)))
    swapped = iban[:6] + iban[7] + iban[6] + iban[8:]
    assert iban[6] == iban[7] or not redaction.iban_ok(swapped)


def test_dni_check_letter_by_hand():
    # 12345678 = 23 * 536768 + 14 and letter 14 of TRWAGMYFPDXBNJZSQVHLCKE is Z; NIE X1234567: 1234567 =
    # 23 * 53676 + 19 -> L.
    assert redaction.dni_ok("12345678Z") and redaction.dni_ok("X1234567L")
    assert not redaction.dni_ok("12345678A") and not redaction.dni_ok("X1234567Z")


def test_nino_never_issued_prefixes_and_jwt_and_ipv6_validators():
    assert redaction.nino_ok("AB123456C") and not redaction.nino_ok("GB123456A")
    jwt_io = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0"
              "IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
    assert redaction.jwt_ok(jwt_io)
    assert not redaction.jwt_ok("eyJub3QganNvbg.eyJhYmMiOjF9.x")  # base64url of '{"not json'
    assert redaction.ipv6_ok("2001:db8::1") and not redaction.ipv6_ok("1:2:3:4:5:6::7:8:9")


# --- order ------------------------------------------------------------------------------------------------


def _swapped(first: str, second: str) -> tuple[redaction.Rule, ...]:
    rules = list(RULES)
    i, j = rules.index(RULES_BY_NAME[first]), rules.index(RULES_BY_NAME[second])
    assert i < j, f"{first} must come before {second}"
    rules[i], rules[j] = rules[j], rules[i]
    return tuple(rules)


@pytest.mark.parametrize(("text", "first", "second", "validate"), [
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlX2hlcmU",
     "bearer_token", "jwt", True),
    ("key sk-ant-api03-Qw3rTyUiOpAsDfGhJkLzXcVbNm", "anthropic_key", "openai_key", True),
    ("api_key=AKIAIOSFODNN7EXAMPLE", "aws_access_key_id", "api_key_assignment", True),
    ("IBAN DE89 3704 0044 0532 0130 00", "iban", "credit_card", False),
    ("card 4000 0123 4567 8905", "credit_card", "phone_national", True),
    ("nat64 64:ff9b::192.0.2.33", "ipv4", "ipv6", True),
])
def test_order_decides_the_label(monkeypatch, text, first, second, validate):
    in_order = {f.rule for f in scan(text, validate=validate)}
    assert first in in_order and second not in in_order
    monkeypatch.setattr(redaction, "RULES", _swapped(first, second))
    assert {f.rule for f in scan(text, validate=validate)} != in_order


def test_known_limit_four_part_versions_look_like_ipv4():
    assert redact("build 1.2.3.4")[0] == "build [REDACTED:ipv4]"


def test_python_redaction_is_linear_enough_on_adversarial_input():
    import time

    start = time.perf_counter()
    redact("a." * 50_000 + "@x." * 20_000 + "1 " * 50_000)
    assert time.perf_counter() - start < 5
