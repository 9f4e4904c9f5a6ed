"""The scale a Delta number key column is typed with, chosen from DynamoDB's number texts (pure: no Delta table)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from migrator.target.delta_number_keys import ColumnDigits, digits_of

THIRTY_EIGHT_DIGITS = "12345678901234567890123456789012345678"


@pytest.mark.parametrize(("text", "digits"), [
    ("0", (0, 0)),
    ("-0", (0, 0)),
    ("7", (1, 0)),
    ("-5.5", (1, 1)),
    ("-0.25", (0, 2)),
    ("1.50", (1, 1)),  # a trailing zero adds no digit the value needs
    ("100", (3, 0)),
    ("1E+2", (3, 0)),
    ("1E+37", (38, 0)),
    ("1E-130", (0, 130)),
    ("9.9999999999999999999999999999999999999E+125", (126, 0)),
    (THIRTY_EIGHT_DIGITS, (38, 0)),
    ("1234567890123456789012345678901234567.8", (37, 1)),
])  # fmt: skip
def test_the_digits_a_number_needs(text, digits):
    assert digits_of(text) == digits


def scale_of(*texts: str) -> pa.DataType | None:
    column = ColumnDigits()
    for text in texts:
        column.add(text)
    return column.decimal_type()


def test_the_scale_is_the_most_fraction_digits_of_any_value():
    assert scale_of("1", "-2.5", "3.125", "0") == pa.decimal128(38, 3)


def test_integers_and_trailing_zeros_take_scale_0():
    assert scale_of("10", "-3", "0", "1E+2", "5.0") == pa.decimal128(38, 0)


def test_1e37_and_38_digits_fit_with_no_fraction():
    assert scale_of("1E+37", THIRTY_EIGHT_DIGITS, "-" + THIRTY_EIGHT_DIGITS) == pa.decimal128(38, 0)


def test_38_digits_beside_a_fraction_fit_no_decimal():
    column = ColumnDigits()
    for text in (THIRTY_EIGHT_DIGITS, "0.5"):
        column.add(text)
    assert column.decimal_type() is None
    assert THIRTY_EIGHT_DIGITS in column.why_not() and "0.5" in column.why_not()


@pytest.mark.parametrize("text", ["1E+38", "1E+125", "-1E+125", "1E-130"])
def test_numbers_beyond_38_digits_fit_no_decimal(text):
    assert scale_of("1", text) is None


def test_a_column_with_no_value_is_not_typed():
    assert scale_of() is None
    assert "no row" in ColumnDigits().why_not()


def test_why_a_column_stays_a_string_names_the_values():
    wide, both = ColumnDigits(), ColumnDigits()
    for text in ("7", "1E+125"):
        wide.add(text)
    for text in (THIRTY_EIGHT_DIGITS, "0.5"):
        both.add(text)
    assert wide.why_not() == "1E+125 has 126 integer digits, more than the 38 of a decimal"
    assert both.why_not() == (f"{THIRTY_EIGHT_DIGITS} has 38 integer digits and 0.5 1 fraction digits, "
                              "together more than the 38 of a decimal")  # fmt: skip
