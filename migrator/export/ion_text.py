"""Amazon Ion text, as DynamoDB S3 exports write it, to DynamoDB JSON attribute values.

AWS documents the mapping ("DynamoDB table export output format", Amazon Ion section,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html):

    S → string     N → decimal     B → blob     BOOL → bool     L → list     M → struct
    SS, NS, BS → list annotated $dynamodb_SS, $dynamodb_NS or $dynamodb_BS
    NULL → null    (not in AWS's table; null is Ion's only value for it)

and each line is the version marker `$ion_1_0` followed by one struct, for example
`$ion_1_0 {Item:{Authors:$dynamodb_SS::["Author1","Author2"],Id:103.,PageCount:6d2}}`.

This module reads exactly that subset of Ion 1.0 text: structs (field names as identifiers,
'quoted symbols' or "strings"), lists, annotations, "short strings" with every Ion escape,
decimals (`103.`, `6d2`, `-1.5d-3`), integers, blobs `{{base64}}`, `true`/`false` and `null`.
Everything else Ion allows but exports do not write (floats, timestamps, symbol values,
s-expressions, clobs, '''long strings''', comments, typed nulls, symbol IDs like `$10`) is
refused by name, so an export this reader does not understand stops the import instead of
being imported approximately.

Why not the `amazon.ion` package (0.15.0, measured): its speed comes from a C extension in
platform-specific wheels, which cannot be loaded from the `--py-files` zip that executors
get, and its pure-Python reader takes about 1.2 ms per item (this reader: about 0.14 ms).
The C extension also fails on a string of 100,000 characters (IERR_BUFFER_TOO_SMALL), when
DynamoDB items reach 400 KB, and held decimals to 34 digits until 2023 (ion-python issue
#159). And the package requires `jsonconversion`, and with it numpy.

Numbers: a decimal becomes the string DynamoDB itself returns for that number (plain
notation, no exponent, no leading or trailing zeros, no "-0": `6d2` → "600",
`1d-130` → "0.000…001"), so an Ion export and a DynamoDB JSON export of the same table
decode to identical items. Digits are moved, never computed with, so no value is rounded.
Binary becomes standard padded base64, as DynamoDB JSON carries it.
"""

from __future__ import annotations

import base64
import binascii
import re
from decimal import Decimal, InvalidOperation
from typing import Any, NoReturn

VERSION_MARKER = "$ion_1_0"

# DynamoDB numbers: up to 38 significant digits, magnitudes from 1E-130 to
# 9.9999999999999999999999999999999999999E+125 (Developer Guide, "Supported data types").
MAX_SIGNIFICANT_DIGITS = 38
MIN_LEADING_EXPONENT = -130
MAX_LEADING_EXPONENT = 125

# DynamoDB nests maps and lists at most 32 levels deep; deeper input is damage, refused
# before Python's own recursion limit turns it into an unclear RecursionError.
MAX_NESTING_DEPTH = 64

SET_ANNOTATIONS = {"$dynamodb_SS": "SS", "$dynamodb_NS": "NS", "$dynamodb_BS": "BS"}
_SET_MEMBER_TYPE = {"SS": "S", "NS": "N", "BS": "B"}

_SPACE = re.compile(r"[ \t\r\n\v\f]*")
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_SYMBOL_ID = re.compile(r"\$[0-9]+")
# Ion integers, decimals and floats share this shape; an 'e' exponent makes a float.
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]*)?(?:[dDeE][+-]?[0-9]+)?")
_PLAIN_RUN = {'"': re.compile(r'[^"\\\n]*'), "'": re.compile(r"[^'\\\n]*")}
_VALUE_END = frozenset(" \t\r\n\v\f,]}")
_UNTIL_DELIMITER = re.compile(r"[^ \t\r\n\v\f,\]}]*")
_ESCAPES = {
    "a": "\a", "b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", "v": "\v",
    "?": "?", "0": "\0", "'": "'", '"': '"', "/": "/", "\\": "\\",
}
_HEX_ESCAPE_DIGITS = {"x": 2, "u": 4, "U": 8}
_SURROGATES = re.compile("[\ud800-\udfff]")

_WRITTEN_BY_EXPORTS = "DynamoDB exports write only structs, lists, strings, decimals, blobs, bools and null"


class IonSyntaxError(ValueError):
    """The line is not Ion text of the subset DynamoDB exports write; says where and why."""

    def __init__(self, column: int, reason: str):
        self.column = column
        self.reason = reason
        super().__init__(f"column {column}: {reason}")


def parse_line(line: str) -> dict[str, dict[str, Any]]:
    """One export line (`$ion_1_0 {...}`) to its top-level fields, each a DynamoDB JSON attribute value.

    `$ion_1_0 {Item:{a:1.}}` gives `{"Item": {"M": {"a": {"N": "1"}}}}`.
    """
    reader = _Reader(line)
    reader.skip_space()
    reader.skip_version_marker()
    value = reader.value()
    if "M" not in value:
        reader.fail(f"the line holds {_kind_name(value)}, not a struct")
    reader.skip_space()
    if not reader.at_end():
        reader.fail("more than one value on the line")
    return value["M"]


def dynamodb_number(text: str) -> str:
    """The decimal `text` (Python syntax: `6E2`, `-0.50`) as the string DynamoDB returns for it.

    Raises ValueError for what DynamoDB cannot store: more than 38 significant digits, or a
    magnitude outside 1E-130 to 9.99…E+125.
    """
    try:
        sign, digit_tuple, exponent = Decimal(text).as_tuple()
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a number") from None
    if not isinstance(exponent, int):
        raise ValueError(f"{text!r} is not a finite number")
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    if not digits:
        return "0"  # DynamoDB has no negative zero
    significant = digits.rstrip("0")
    exponent += len(digits) - len(significant)
    if len(significant) > MAX_SIGNIFICANT_DIGITS:
        raise ValueError(f"{text} has {len(significant)} significant digits; DynamoDB keeps at most 38")
    leading_exponent = exponent + len(significant) - 1
    if not MIN_LEADING_EXPONENT <= leading_exponent <= MAX_LEADING_EXPONENT:
        raise ValueError(f"{text} is outside the magnitudes DynamoDB stores (1E-130 to 9.99…E+125)")
    plain = _plain_notation(significant, exponent)
    return "-" + plain if sign else plain


def _plain_notation(digits: str, exponent: int) -> str:
    """digits × 10^exponent written out: ("15", -1) → "1.5", ("6", 2) → "600", ("1", -3) → "0.001"."""
    if exponent >= 0:
        return digits + "0" * exponent
    point = len(digits) + exponent
    if point > 0:
        return digits[:point] + "." + digits[point:]
    return "0." + "0" * -point + digits


class _Reader:
    """A cursor over one line; each method reads one construct and leaves `pos` after it."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.depth = 0

    # ---- positions and failures ----

    def fail(self, reason: str, pos: int | None = None) -> NoReturn:
        raise IonSyntaxError((self.pos if pos is None else pos) + 1, reason)

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_space(self) -> None:
        self.pos = _SPACE.match(self.text, self.pos).end()

    def take(self, char: str) -> bool:
        if self.peek() == char:
            self.pos += 1
            return True
        return False

    def expect(self, char: str, what: str) -> None:
        if not self.take(char):
            found = repr(self.peek()) if not self.at_end() else "the end of the line"
            self.fail(f"expected {char!r} {what}, found {found}")

    def skip_version_marker(self) -> None:
        """Step over `$ion_1_0` (each export line starts with it; a line without it is read the same)."""
        match = _IDENTIFIER.match(self.text, self.pos)
        if match and match.group() == VERSION_MARKER and not self._annotation_follows(match.end()):
            self.pos = match.end()
            self.skip_space()

    # ---- values ----

    def value(self) -> dict[str, Any]:
        """The value at `pos`, with its annotations, as a DynamoDB JSON attribute value."""
        start = self.pos
        self.depth += 1
        if self.depth > MAX_NESTING_DEPTH:
            self.fail(f"values nested more than {MAX_NESTING_DEPTH} levels deep; DynamoDB allows 32")
        annotations = self._annotations()
        value = self._bare_value()
        self.depth -= 1
        return _as_set(annotations, value, self, start) if annotations else value

    def _annotations(self) -> list[str]:
        annotations = []
        while True:
            start = self.pos
            symbol = self._symbol_if_any()
            if symbol is None or not self._annotation_follows(self.pos):
                self.pos = start
                return annotations
            self.skip_space()
            self.pos += 2  # '::'
            self.skip_space()
            annotations.append(symbol)

    def _annotation_follows(self, pos: int) -> bool:
        return self.text.startswith("::", _SPACE.match(self.text, pos).end())

    def _bare_value(self) -> dict[str, Any]:
        char = self.peek()
        if char == '"':
            return {"S": self._quoted('"')}
        if char == "{":
            return self._blob() if self.text.startswith("{{", self.pos) else self._struct()
        if char == "[":
            return self._list()
        if char == "-" or char.isdigit():
            return self._number()
        if char == "'":
            if self.text.startswith("'''", self.pos):
                self.fail("long strings ('''...''') are not written by DynamoDB exports")
            self.fail(f"a symbol value; {_WRITTEN_BY_EXPORTS}")
        if _IDENTIFIER.match(self.text, self.pos):
            return self._keyword()
        if char == "(":
            self.fail(f"an s-expression; {_WRITTEN_BY_EXPORTS}")
        if char == "/":
            self.fail("a comment; DynamoDB exports write none")
        found = repr(char) if char else "the end of the line"
        self.fail(f"expected a value, found {found}")

    def _keyword(self) -> dict[str, Any]:
        start = self.pos
        word = _IDENTIFIER.match(self.text, self.pos).group()
        self.pos += len(word)
        if word in ("true", "false"):
            return {"BOOL": word == "true"}
        if word == "null":
            if self.take("."):
                typed = _IDENTIFIER.match(self.text, self.pos)
                type_name = typed.group() if typed else ""
                self.pos += len(type_name)
                if type_name != "null":
                    self.fail(f"a typed null (null.{type_name}); DynamoDB's NULL is written as null", start)
            return {"NULL": True}
        if word == "nan":
            self.fail("nan, a float; DynamoDB numbers are decimals", start)
        self.fail(f"the symbol value {word!r}; {_WRITTEN_BY_EXPORTS}", start)

    def _number(self) -> dict[str, Any]:
        start = self.pos
        match = _NUMBER.match(self.text, self.pos)
        end = match.end() if match else self.pos
        if match is None or (end < len(self.text) and self.text[end] not in _VALUE_END):
            snippet = _UNTIL_DELIMITER.match(self.text, start).group()[:40]
            self.fail(f"unsupported value {snippet!r} (a float, timestamp or non-decimal integer?); "
                      f"{_WRITTEN_BY_EXPORTS}", start)
        token = match.group()
        if "e" in token or "E" in token:
            self.fail(f"the float {token}: DynamoDB numbers are decimals, which a float cannot hold exactly", start)
        self.pos = end
        try:
            return {"N": dynamodb_number(token.replace("d", "E").replace("D", "E"))}
        except ValueError as exc:
            self.fail(str(exc), start)

    def _quoted(self, quote: str) -> str:
        """A "string" or 'symbol' from its opening quote, escapes resolved."""
        start = self.pos
        self.pos += 1
        pieces = []
        while True:
            run = _PLAIN_RUN[quote].match(self.text, self.pos)
            pieces.append(run.group())
            self.pos = run.end()
            char = self.peek()
            if char == quote:
                self.pos += 1
                break
            if char != "\\":
                self.fail("unterminated string" if quote == '"' else "unterminated quoted symbol", start)
            pieces.append(self._escape())
        text = "".join(pieces)
        return _join_surrogate_pairs(text, self, start) if _SURROGATES.search(text) else text

    def _escape(self) -> str:
        start = self.pos
        code = self.text[self.pos + 1:self.pos + 2]
        self.pos += 2
        if code in _ESCAPES:
            return _ESCAPES[code]
        if code == "\n":  # an escaped newline continues the string
            return ""
        if code == "\r":
            self.take("\n")
            return ""
        width = _HEX_ESCAPE_DIGITS.get(code)
        hex_digits = self.text[self.pos:self.pos + width] if width else ""
        if not width or len(hex_digits) != width or not all(c in "0123456789abcdefABCDEF" for c in hex_digits):
            self.fail(f"unknown escape {self.text[start:start + 2 + (width or 0)]!r}", start)
        self.pos += width
        code_point = int(hex_digits, 16)
        if code_point > 0x10FFFF:
            self.fail(f"escape {self.text[start:self.pos]!r} is beyond Unicode", start)
        return chr(code_point)

    def _struct(self) -> dict[str, Any]:
        self.pos += 1  # '{'
        fields: dict[str, Any] = {}
        self.skip_space()
        while not self.take("}"):
            name_at = self.pos
            name = self._field_name()
            self.skip_space()
            self.expect(":", f"after the field name {name!r}")
            self.skip_space()
            if name in fields:
                self.fail(f"the field {name!r} appears twice in one struct", name_at)
            fields[name] = self.value()
            self.skip_space()
            if not self.take(","):
                self.expect("}", "or ',' after a struct field")
                break
            self.skip_space()
        return {"M": fields}

    def _field_name(self) -> str:
        char = self.peek()
        if char in ('"', "'"):
            return self._quoted(char)
        match = _IDENTIFIER.match(self.text, self.pos)
        if match is None:
            found = repr(char) if char else "the end of the line"
            self.fail(f"expected a field name, found {found}")
        if _SYMBOL_ID.fullmatch(match.group()):
            self.fail(f"symbol ID {match.group()} needs a symbol table; DynamoDB exports write names as text")
        self.pos = match.end()
        return match.group()

    def _symbol_if_any(self) -> str | None:
        """An identifier or 'quoted symbol' at `pos`, or None (then `pos` is unchanged)."""
        if self.peek() == "'" and not self.text.startswith("'''", self.pos):
            return self._quoted("'")
        match = _IDENTIFIER.match(self.text, self.pos)
        if match is None:
            return None
        self.pos = match.end()
        return match.group()

    def _list(self) -> dict[str, Any]:
        self.pos += 1  # '['
        members = []
        self.skip_space()
        while not self.take("]"):
            members.append(self.value())
            self.skip_space()
            if not self.take(","):
                self.expect("]", "or ',' after a list member")
                break
            self.skip_space()
        return {"L": members}

    def _blob(self) -> dict[str, Any]:
        start = self.pos
        end = self.text.find("}}", self.pos + 2)
        if end < 0:
            self.fail("unterminated blob", start)
        content = "".join(self.text[self.pos + 2:end].split())  # base64 may be spread out with spaces
        if content[:1] in ('"', "'"):
            self.fail(f"a clob; {_WRITTEN_BY_EXPORTS}", start)
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            self.fail("the blob is not valid base64", start)
        self.pos = end + 2
        return {"B": base64.b64encode(data).decode("ascii")}


def _as_set(annotations: list[str], value: dict[str, Any], reader: _Reader, start: int) -> dict[str, Any]:
    """An annotated list as the DynamoDB set its annotation names; any other annotation is refused."""
    set_type = SET_ANNOTATIONS.get(annotations[0]) if len(annotations) == 1 else None
    if set_type is None:
        reader.fail(f"the annotation {'::'.join(annotations)}:: is not one DynamoDB exports write "
                    f"({', '.join(SET_ANNOTATIONS)})", start)
    if "L" not in value:
        reader.fail(f"{annotations[0]} annotates {_kind_name(value)}, not a list", start)
    member_type = _SET_MEMBER_TYPE[set_type]
    members = []
    for member in value["L"]:
        (kind, payload), = member.items()
        if kind != member_type:
            reader.fail(f"a {set_type} set holds {_kind_name(member)}", start)
        members.append(payload)
    if not members:
        reader.fail(f"an empty {set_type} set; DynamoDB holds no empty sets", start)
    return {set_type: members}


def _join_surrogate_pairs(text: str, reader: _Reader, start: int) -> str:
    """\\uD83D\\uDE80 escapes one character as a UTF-16 pair; join such pairs, refuse lone halves."""
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        reader.fail("a lone UTF-16 surrogate escape is not a character", start)


def _kind_name(value: dict[str, Any]) -> str:
    names = {"S": "a string", "N": "a number", "B": "a blob", "BOOL": "a bool", "NULL": "null",
             "L": "a list", "M": "a struct", "SS": "a string set", "NS": "a number set", "BS": "a binary set"}
    (kind, _), = value.items()
    return names[kind]
