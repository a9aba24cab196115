"""PII and secret redaction for prompt/response logs: one rule table, applied by Python and by the collector.

`RULES` is the single source of truth. `serving.logpipeline` turns it into OpenTelemetry Collector OTTL
`replace_pattern` statements; `redact()` applies the same table in Python (for tests, offline scrubbing of
exported files, and to measure precision).

Engines and "identical"
  Every pattern is written in the subset shared by Python `re` (compiled with `re.ASCII`) and RE2, the
  engine of Go's `regexp` that OTTL uses: no look-around, no back-references, no `\\s` (RE2 leaves out
  `\\v`), no `(?i)` (RE2 folds `ſ`/`K` into `s`/`k`, Python's ASCII mode does not; case-insensitive keywords
  are spelled as `[Bb][Ee]...` classes instead). "Identical" means: for every rule, Python `re` and RE2 find
  the same spans on the whole test corpus, and `redact(text, validate=False)` gives byte-for-byte the
  collector's output (the tests replay the generated OTTL statements through RE2 to show it).

Validators and the collector (the Luhn decision)
  Some checks are not regular: the Luhn check of card numbers, the IBAN mod-97 check, the Spanish DNI check
  letter, the UK NINO prefixes never issued, whether a JWT header decodes to JSON, whether a `::` form is a
  real IPv6 address. The collector cannot run them, so it applies each pattern unconditionally: where a rule
  has a validator, the collector redacts a superset of what Python redacts (it also hides e.g. a
  Luhn-invalid 16-digit number starting with 2-6). That errs on the side of never leaking; the cost is some
  over-redaction, which the corpus test reports as the collector's precision. Python runs the validator and is
  what the per-rule precision/recall is measured on. When Python's validator rejects a whole pattern match,
  it looks for the longest valid sub-span inside it that ends at a word boundary (so "4111 1111 1111 1111
  12/29", card plus expiry, still redacts the card); every span Python redacts therefore lies inside a span
  the collector redacts.

Order (the table order is the application order, each rule runs on the output of the previous ones)
  credentials first (a `Bearer` header swallows the JWT inside it; the vendor-specific key rules run before
  the generic `api_key=` assignment so the label names the vendor), then e-mail, then IBAN before card
  numbers (an IBAN's digits look like a card), cards before national IDs and phones (a spaced card number
  looks like a phone), phones, and IP addresses last (IPv4 before IPv6, so an IPv4-mapped `::ffff:192.0.2.1`
  loses its IPv4 part). Replacement tokens (`[REDACTED:<rule>]`) match no rule, which the tests check.

Known limits (documented, not hidden): national phone numbers are only recognised with separators (a bare
10-digit number is indistinguishable from an order number), SSNs only with `-` or space separators, IBANs
only in upper case, a four-part dotted version whose parts are all <= 255 looks exactly like an IPv4
address, and `::1`/`::` are not redacted (loopback/unspecified, not personal data).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

REPLACEMENT_FORMAT = "[REDACTED:{}]"


def _ci(word: str) -> str:
    """A case-insensitive spelling of an ASCII keyword that both engines read the same way."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


@dataclass(frozen=True)
class Rule:
    """One redaction rule: the same pattern runs in Python and in the collector."""

    name: str
    pattern: str  # RE2-compatible; the collector applies it as-is
    source: str  # where the format comes from, and why the rule exists
    validator: Callable[[str], bool] | None = None  # Python only; the collector redacts every match
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern, re.ASCII))

    @property
    def replacement(self) -> str:
        return REPLACEMENT_FORMAT.format(self.name)


@dataclass(frozen=True)
class Finding:
    """A redacted span, in the coordinates of the text given to `scan`."""

    rule: str
    start: int
    end: int
    value: str


# --- validators (pure functions, each checked against published examples in the tests) -------------------


def luhn_ok(candidate: str) -> bool:
    """ISO/IEC 7812-1 Annex B (Luhn) check over the digits of `candidate`, 13-19 digits long."""
    digits = [int(c) for c in candidate if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def iban_ok(candidate: str) -> bool:
    """ISO 13616: first four characters moved to the end, letters read as 10..35, the number mod 97 is 1."""
    s = candidate.replace(" ", "")
    if not 15 <= len(s) <= 34 or not s.isalnum():
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


_NINO_NEVER_ISSUED = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})


def nino_ok(candidate: str) -> bool:
    """HMRC NIM39110: the prefixes BG, GB, KN, NK, NT, TN and ZZ are never allocated (the rest is regular)."""
    return candidate[:2] not in _NINO_NEVER_ISSUED


_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def dni_ok(candidate: str) -> bool:
    """Spanish DNI/NIE check letter: the number (NIE X/Y/Z read as 0/1/2) mod 23 indexes `_DNI_LETTERS`."""
    s = candidate.replace("-", "")
    number = s[:-1]
    if number[0] in "XYZ":
        number = str("XYZ".index(number[0])) + number[1:]
    return _DNI_LETTERS[int(number) % 23] == s[-1]


def jwt_ok(candidate: str) -> bool:
    """RFC 7519: the first segment is base64url of a JSON object with an `alg` member (RFC 7515 4.1.1)."""
    header = candidate.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (ValueError, binascii.Error):
        return False
    return isinstance(decoded, dict) and "alg" in decoded


def ipv6_ok(candidate: str) -> bool:
    """RFC 4291 section 2.2 text form: at most eight groups, `::` standing for at least one."""
    try:
        ipaddress.IPv6Address(candidate)
    except ValueError:
        return False
    return True


# --- the table ------------------------------------------------------------------------------------------

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_H16 = r"[0-9A-Fa-f]{1,4}"
_SECRET_KEYWORDS = ("x-api-key", "api_key", "api-key", "apikey", "access_token", "auth_token",
                    "aws_secret_access_key", "secret_key", "client_secret", "password", "passwd")

RULES: tuple[Rule, ...] = (
    Rule("bearer_token",
         r"\b" + _ci("bearer") + r"[ \t]+[A-Za-z0-9._~+/-]{16,}=*",
         "RFC 6750 section 2.1 b64token after 'Bearer'; 16+ characters so prose ('bearer of') is left alone"),
    Rule("jwt",
         r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
         "RFC 7519 compact JWS: base64url('{\"') is 'eyJ' for header and claims", jwt_ok),
    Rule("aws_access_key_id",
         r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
         "AWS IAM User Guide, unique ID prefixes: AKIA long-term, ASIA temporary access key IDs (20 chars)"),
    Rule("github_token",
         r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
         "GitHub docs, token formats: ghp_/gho_/ghu_/ghs_/ghr_ prefixes and github_pat_ fine-grained tokens"),
    Rule("anthropic_key",
         r"\bsk-ant-[A-Za-z0-9_-]{20,}",
         "Anthropic API keys start with sk-ant- (sk-ant-api03-...); before openai_key, which matches too"),
    Rule("openai_key",
         r"\bsk-[A-Za-z0-9_-]{20,}",
         "OpenAI-style secret keys: sk- then 20+ URL-safe characters (sk-proj-, sk-svcacct-, legacy sk-)"),
    Rule("api_key_assignment",
         r"\b(?:" + "|".join(_ci(k) for k in _SECRET_KEYWORDS) + r")[\"']?[ \t]*[:=][ \t]*[\"']?"
         r"[A-Za-z0-9_./+=-]{8,}",
         "Generic key=value, key: value and JSON \"key\": \"value\" secrets; the key name goes too"),
    Rule("email",
         r"\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,63}\b",
         "RFC 5322 dot-atom addr-spec, RFC 5321 4.5.3.1 lengths (local part <= 64, labels <= 63)"),
    Rule("iban",
         r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b",
         "ISO 13616 / SWIFT IBAN Registry: country, check digits, BBAN, paper format in groups of four",
         iban_ok),
    Rule("credit_card",
         r"\b[2-6](?:[ -]?[0-9]){12,18}\b",
         "ISO/IEC 7812: 13-19 digit PAN, major industry 2-6 (Mastercard 2-series, Amex/Diners/JCB, Visa, "
         "Mastercard, Discover/UnionPay/Maestro); PCI DSS forbids storing it", luhn_ok),
    Rule("us_ssn",
         r"\b(?:00[1-9]|0[1-9][0-9]|[1-5][0-9]{2}|6[0-5][0-9]|66[0-57-9]|6[7-9][0-9]|[78][0-9]{2})[- ]"
         r"(?:0[1-9]|[1-9][0-9])[- ](?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})\b",
         "SSA SSN randomization (2011): area 000, 666, 900-999, group 00 and serial 0000 are never issued"),
    Rule("uk_nino",
         r"\b[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]\b",
         "HMRC National Insurance Manual NIM39110: no D/F/I/Q/U/V first, no D/F/I/O/Q/U/V second, suffix A-D",
         nino_ok),
    Rule("es_dni",
         r"\b(?:[0-9]{8}|[XYZ][0-9]{7})-?[A-HJ-NP-TV-Z]\b",
         "Spain, Ministerio del Interior: DNI 8 digits / NIE X|Y|Z + 7 digits, then the mod-23 check letter",
         dni_ok),
    Rule("phone_intl",
         r"\+[1-9][0-9]{0,2}(?:[ .-]?\([0-9]{1,4}\))?(?:[ .-]?[0-9]){6,12}\b",
         "ITU-T E.164: '+', 1-3 digit country code, optional (area) right after it, then 6-12 digits"),
    Rule("phone_nanp",
         r"(?:\([2-9][0-9]{2}\) ?|\b[2-9][0-9]{2}[ .-])[2-9][0-9]{2}[ .-][0-9]{4}\b",
         "NANP (US/Canada) national format: area code and exchange 2-9XX, separators required"),
    Rule("phone_national",
         r"\b(?:0[1-9][0-9]{1,3}[ -][0-9]{3,4}[ -]?[0-9]{3,4}|0[1-9](?:[ .][0-9]{2}){4})\b",
         "Trunk-prefix national formats with separators: UK/DE '0AAAA NNN NNN', FR '0N NN NN NN NN'"),
    Rule("ipv4",
         r"\b(?:" + _OCTET + r"\.){3}" + _OCTET + r"\b",
         "RFC 791 dotted quad, each octet 0-255 (IP addresses are personal data under GDPR)"),
    Rule("ipv6",
         r"\b(?:" + _H16 + r"(?::" + _H16 + r"){7}|" + _H16 + r"(?::" + _H16 + r"){0,5}::" + _H16
         + r"(?::" + _H16 + r"){0,5})\b",
         "RFC 4291 section 2.2 full and '::'-compressed forms with a group on each side of '::'", ipv6_ok),
)

RULES_BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}


# --- applying the table ---------------------------------------------------------------------------------


def _is_word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def _validated_spans(rule: Rule, text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans inside the pattern match [start, end) that Python redacts: the match itself if the validator
    accepts it, else, left to right, the longest sub-span that matches the pattern, ends at a word boundary
    and passes the validator."""
    assert rule.validator is not None
    if rule.validator(text[start:end]):
        return [(start, end)]
    spans: list[tuple[int, int]] = []
    i = start
    while i < end:
        found = None
        if rule.regex.match(text, i, end):  # cheap filter: nothing can start at i otherwise
            for j in range(end - 1, i, -1):
                boundary = not (_is_word(text[j - 1]) and _is_word(text[j]))
                if boundary and rule.regex.fullmatch(text, i, j) and rule.validator(text[i:j]):
                    found = j
                    break
        if found is None:
            i += 1
        else:
            spans.append((i, found))
            i = found
    return spans


def _rule_spans(rule: Rule, work: str, validate: bool) -> list[tuple[int, int]]:
    """The spans of `work` one rule redacts: every pattern match, or with `validate` the validated parts."""
    spans: list[tuple[int, int]] = []
    for m in rule.regex.finditer(work):
        if validate and rule.validator is not None:
            spans.extend(_validated_spans(rule, work, m.start(), m.end()))
        else:
            spans.append(m.span())
    return spans


def scan(text: str, *, validate: bool = True) -> list[Finding]:
    """Every span the table redacts, rule by rule in table order, in the coordinates of `text`.

    `validate=False` is the collector's behaviour (patterns only)."""
    work = text
    # For each character of `work`, the span of `text` it stands for (a replacement token stands for the
    # whole span it replaced, so a later match that overlaps it maps back to the original text).
    origin: list[tuple[int, int]] = [(k, k + 1) for k in range(len(text))]
    findings: list[Finding] = []
    for rule in RULES:
        spans = _rule_spans(rule, work, validate)
        if not spans:
            continue
        token = rule.replacement
        new_work: list[str] = []
        new_origin: list[tuple[int, int]] = []
        last = 0
        for s, e in spans:
            o_start, o_end = origin[s][0], origin[e - 1][1]
            findings.append(Finding(rule.name, o_start, o_end, text[o_start:o_end]))
            new_work.append(work[last:s])
            new_origin.extend(origin[last:s])
            new_work.append(token)
            new_origin.extend([(o_start, o_end)] * len(token))
            last = e
        new_work.append(work[last:])
        new_origin.extend(origin[last:])
        work, origin = "".join(new_work), new_origin
    return findings


def redact(text: str, *, validate: bool = True) -> tuple[str, dict[str, int]]:
    """`text` with every finding replaced by `[REDACTED:<rule>]`, and how many spans each rule redacted.

    With `validate=False` the output is the collector's output for the same line."""
    work = text
    counts: Counter[str] = Counter()
    for rule in RULES:
        spans = _rule_spans(rule, work, validate)
        if not spans:
            continue
        pieces: list[str] = []
        last = 0
        for s, e in spans:
            pieces += [work[last:s], rule.replacement]
            last = e
        work = "".join([*pieces, work[last:]])
        counts[rule.name] += len(spans)
    return work, dict(counts)
