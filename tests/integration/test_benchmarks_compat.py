"""benchmarks/compat.py reads pytest's summary line and crash output the way pytest prints them."""

from benchmarks.compat import crash_line, parse_summary


def test_summary_line_counts_every_outcome() -> None:
    out = "collected 9 items\n...\n==== 5 passed, 2 failed, 1 error, 3 warnings in 12.31s (0:00:12) ===="
    assert parse_summary(out) == {"passed": 5, "failed": 2, "error": 1, "warning": 3}


def test_quiet_summary_and_plural_errors() -> None:
    assert parse_summary("FAILED t.py::x\n1 failed, 4 passed, 2 errors in 0.50s\n") == {
        "failed": 1, "passed": 4, "error": 2}
    assert parse_summary("=== 2 skipped, 1 xfailed, 3 deselected in 1.0s ===") == {
        "skipped": 2, "xfailed": 1, "deselected": 3}


def test_no_tests_ran_and_no_summary() -> None:
    assert parse_summary("=== no tests ran in 0.01s ===") == {}
    assert parse_summary("INTERNALERROR> KeyError: 'endheaders'\n") is None


def test_crash_line_names_the_internal_error() -> None:
    out = ("INTERNALERROR> Traceback (most recent call last):\n"
           "INTERNALERROR>   File \"x.py\", line 3, in f\n"
           "INTERNALERROR> KeyError: 'endheaders'\n")
    assert crash_line(out) == "INTERNALERROR: KeyError: 'endheaders'"
    assert crash_line("E   pluggy.PluginValidationError: unknown hook\n") == (
        "pluggy.PluginValidationError: unknown hook")
