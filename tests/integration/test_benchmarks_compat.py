"""benchmarks/compat.py reads pytest's summary line and crash output the way pytest prints them."""

from benchmarks.compat import crash_line, parse_summary, table, wall


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


def test_wall_time_names_the_load_it_was_taken_under() -> None:
    assert wall({"wall_s": 12.5, "load": 7.6}) == "12.5 s (load 8)"
    assert wall({"wall_s": 12.5}) == "12.5 s"  # a results file written before the load was kept


def test_alternating_runs_are_a_table_of_their_own() -> None:
    run = {"label": "after", "counts": {"passed": 8}, "wall_s": 4.4, "load": 6.0, "lost": {}}
    report = {"casstore": "abc", "machine": "m", "date": "d", "command": "c", "projects": [
        {"name": "gql", "revision": "gql==4.4.0", "baseline": {**run, "label": "baseline"}, "after": [run],
         "migration": {"changed_by_install": []},
         "alternate": {"runs": 2, "baseline_s": 3.15, "after_s": 3.35, "ratio": 1.06, "load": [5.5, 5.6]}}]}
    text = table(report)
    assert "| gql | `gql==4.4.0` | 8 / 0 | 4.4 s (load 6) | after | 8 / 0 | 4.4 s (load 6) | 0 |" in text
    assert "| gql | 2 | 3.15 s | 3.35 s | 1.06 | 6–6 |" in text
