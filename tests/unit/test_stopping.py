"""SIGTERM handled as Ctrl+C: raised once as Terminated (a KeyboardInterrupt), exit code 143."""

import signal

import pytest

from migrator.stopping import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, exit_code, handle_sigterm_as_ctrl_c


@pytest.fixture
def sigterm_handler_restored():
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_raises_terminated_once_then_a_repeat_is_ignored(sigterm_handler_restored):
    handle_sigterm_as_ctrl_c()
    with pytest.raises(KeyboardInterrupt) as stopped:
        signal.raise_signal(signal.SIGTERM)
    assert isinstance(stopped.value, Terminated)
    signal.raise_signal(signal.SIGTERM)  # the same SIGTERM forwarded by the JVM: nothing more happens


def test_exit_codes_are_128_plus_the_signal():
    assert (EXIT_INTERRUPTED, EXIT_TERMINATED) == (130, 143)
    assert exit_code(Terminated()) == 143 and exit_code(KeyboardInterrupt()) == 130
