"""Durations round-trip: what the API echoes is what it accepts, and means the same."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.core.validation import format_duration, parse_duration
from tests.api.support import assert_problem

from .factories import observed_just_ahead
from .support import RECORDS, write

ECHOED = [
    ("P30D", "P30D"),
    ("PT0.5S", "PT0.5S"),
    ("PT0.000001S", "PT0.000001S"),
    ("P1DT2H3M4.25S", "P1DT2H3M4.25S"),
    ("PT1H30M", "PT1H30M"),
    ("P2W", "P14D"),
    ("PT36H", "P1DT12H"),
    ("PT90S", "PT1M30S"),
    ("PT1.500000S", "PT1.5S"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("sent", "echoed"), ECHOED)
def test_it_echoes_a_ttl_it_accepts_again(agent, sent, echoed):
    first = write(agent, subject="user:1", retention__ttl=sent, observed_at=observed_just_ahead())
    assert first.status_code == 201, first.content
    assert first.json()["retention"]["ttl"] == echoed
    again = write(agent, subject="user:2", retention__ttl=echoed, observed_at=observed_just_ahead())
    assert again.status_code == 201, again.content
    assert again.json()["retention"]["ttl"] == echoed
    assert first.json()["expires_at"] is not None


REFUSED = [
    "P30DT",  # a T with no time after it
    "P1DT",
    "PT",
    "P",
    "P1.5D",  # only seconds may have a fraction
    "PT1.5H",
    "P1W2D",  # weeks stand alone
    "PT0.1234567S",  # finer than a microsecond: it could not be echoed
    "PT1,5S",
    "-P1D",
    "P-1D",
    "p30d",
    "P30D ",
    "P1Y",
    "P6M",
    "PT0S",
    "P0D",
    "P36501D",
    "30",
]


@pytest.mark.django_db
@pytest.mark.parametrize("ttl", REFUSED)
def test_it_refuses_a_malformed_or_zero_ttl(agent, ttl):
    problem = assert_problem(agent.post(RECORDS, _body(ttl)), 400)
    assert list(problem["errors"]) == ["retention.ttl"], problem


def _body(ttl: str):
    from .factories import body

    return body(retention__ttl=ttl)


@given(
    st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=36500)),
)
def test_format_and_parse_are_inverses(duration):
    text = format_duration(duration)
    assert text is not None
    assert parse_duration(text) == duration
    assert format_duration(parse_duration(text)) == text
