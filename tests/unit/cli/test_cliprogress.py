"""zerorename.cliprogress: which display a command gets (pure), and the plain line."""

from __future__ import annotations

import io

import pytest

from zerorename.cli.progress import LineBar, choose, open_bar, rate_line


@pytest.mark.parametrize(
    ("mode", "out_tty", "err_tty", "have", "want"),
    [
        ("auto", True, True, {"rich", "tqdm"}, "rich"),
        ("auto", True, True, {"tqdm"}, "tqdm"),
        ("auto", True, True, set(), "line"),
        ("auto", False, True, {"rich"}, "none"),  # stdout piped: nothing animated
        ("auto", True, False, {"rich"}, "none"),  # stderr to a file: nothing either
        ("on", False, False, {"rich"}, "lines"),  # --progress piped: plain lines
        ("on", True, True, set(), "line"),
        ("off", True, True, {"rich"}, "none"),  # --quiet
    ],
)
def test_the_display_chosen(
    mode: str, out_tty: bool, err_tty: bool, have: set[str], want: str
) -> None:
    assert choose(mode, stdout_tty=out_tty, stderr_tty=err_tty, have=have) == want


def test_the_plain_line_has_amount_rate_and_time_left() -> None:
    line = rate_line("put x", 8 << 20, 32 << 20, "B", 4.0)
    assert line == "put x: 8.0MiB/32.0MiB (25%) 2.0MiB/s, 0:00:12 left"
    assert rate_line("complete", 3, 10, "uploads", 1.5) == (
        "complete: 3 uploads/10 uploads (30%) 2 uploads/s, 0:00:03 left"
    )
    assert rate_line("abort", 5, None, "uploads", 0.0) == "abort: 5 uploads 0 uploads/s"


def test_piped_lines_never_redraw() -> None:
    out = io.StringIO()
    bar = LineBar("put x", 100, "B", out, tty=False)
    for _ in range(100):
        bar.advance(1)
    bar.close()
    text = out.getvalue()
    assert "\r" not in text and text.endswith("\n") and text.splitlines()[-1].startswith("put x:")


def test_a_pipe_gets_no_display_by_default() -> None:
    out = io.StringIO()  # not a terminal
    bar = open_bar("auto", "put x", 10, "B", out=out)
    bar.advance(10)
    bar.close()
    assert out.getvalue() == ""
