"""The completion window, pure: ordering, the window bound, when the journal is saved,
failures, the resumed 'uncertain' range. No I/O, no event loop."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.committers.commit.window import Action, CompletionWindow, Step


def open_and_hand_out(w: CompletionWindow, index: int, uploads: int = 1) -> None:
    assert w.poll() == Step(Action.OPEN, index)
    w.open(index)
    for _ in range(uploads):
        w.handed_out(index)
    w.close(index)


def test_sets_open_in_plan_order_within_the_window() -> None:
    w = CompletionWindow(0, window=4, total=10)
    for i in range(4):
        open_and_hand_out(w, i)
    assert w.poll() == Step(Action.WAIT)  # 4 in flight, nothing done, nothing to save
    with pytest.raises(ValueError):
        w.open(5)  # only the set poll() names may open


def test_the_watermark_moves_only_over_finished_sets() -> None:
    w = CompletionWindow(0, window=4, total=10)
    for i in range(4):
        open_and_hand_out(w, i)
    w.succeeded(1)
    w.succeeded(2)
    assert w.low == 0 and w.poll() == Step(Action.WAIT)  # out of order: 0 still runs
    w.succeeded(0)
    assert w.low == 3
    assert w.poll() == Step(Action.SAVE, 3)  # half the window released: save it
    w.saved(3)
    for i in range(4, 7):  # persisted 3 + window 4: sets 4, 5, 6 may open, 7 may not
        open_and_hand_out(w, i)
    assert w.poll() == Step(Action.WAIT)


def test_a_blocked_window_saves_once_half_of_it_is_released() -> None:
    w = CompletionWindow(0, window=4, total=10)
    for i in range(4):
        open_and_hand_out(w, i)
    w.succeeded(0)  # 1 released: set 4 waits, but a save now would lift the bound by 1
    assert w.poll() == Step(Action.WAIT)
    w.succeeded(1)
    assert w.poll() == Step(Action.SAVE, 2)
    w.saved(2)
    assert w.poll() == Step(Action.OPEN, 4)


def test_sets_open_before_a_save_that_is_due() -> None:
    """A save lifts the bound; the sets it lets open go first, then the next save (while
    they complete): saves never come back to back."""
    w = CompletionWindow(0, window=4, total=10)
    for i in range(4):
        open_and_hand_out(w, i)
    w.succeeded(0)
    w.succeeded(1)
    assert w.poll() == Step(Action.SAVE, 2)
    w.succeeded(2)
    w.succeeded(3)  # during the save: 4 released by now
    w.saved(2)
    open_and_hand_out(w, 4)
    open_and_hand_out(w, 5)
    assert w.poll() == Step(Action.SAVE, 4)


def test_a_pass_within_the_window_saves_nothing() -> None:
    """At most ``window`` sets: none can wait for a save, so the journal is not written
    between the completes (the driver's state move saves the end): one round trip less."""
    w = CompletionWindow(0, window=8, total=8)
    for i in range(8):
        open_and_hand_out(w, i, uploads=2)
    assert w.poll() == Step(Action.STOP)  # all handed out; results still to come
    for i in range(8):
        w.succeeded(i)
        assert w.poll() == Step(Action.STOP)  # half the window released: still no save
        w.succeeded(i)
    assert w.unfinished == 0 and w.persisted == 0
    assert w.poll() == Step(Action.STOP)


def test_saves_stop_once_the_rest_fits_in_the_window() -> None:
    w = CompletionWindow(0, window=4, total=6)
    for i in range(4):
        open_and_hand_out(w, i)
    w.succeeded(0)
    w.succeeded(1)
    assert w.poll() == Step(Action.SAVE, 2)  # sets 4 and 5 wait beyond the window
    w.saved(2)
    for i in (4, 5):
        open_and_hand_out(w, i)
    for i in (2, 3, 4, 5):
        w.succeeded(i)
    assert w.low == 6 and w.poll() == Step(Action.STOP)  # the end: the driver's to save


def test_a_set_with_nothing_to_complete_finishes_when_closed() -> None:
    w = CompletionWindow(0, window=2, total=2)
    open_and_hand_out(w, 0, uploads=0)
    assert w.low == 1


def test_a_failure_stops_handing_out() -> None:
    w = CompletionWindow(0, window=4, total=10)
    open_and_hand_out(w, 0, uploads=2)
    w.succeeded(0)
    err = RuntimeError("InvalidPart")
    w.failed(err)
    assert w.stopped and w.failures == [err]
    assert w.poll() == Step(Action.STOP)  # not even the sets the window would allow
    assert w.unfinished == 10


def test_resumed_pass_checks_only_the_uncertain_range() -> None:
    w = CompletionWindow(5, window=4, total=20, uncertain_until=9)
    assert w.poll() == Step(Action.OPEN, 5)  # everything below the watermark is done
    assert [i for i in range(20) if w.must_check(i)] == list(range(9))
    fresh = CompletionWindow(0, window=4, total=20)
    assert not any(fresh.must_check(i) for i in range(20))


def test_refused_arguments() -> None:
    with pytest.raises(ValueError):
        CompletionWindow(0, window=0, total=1)
    with pytest.raises(ValueError):
        CompletionWindow(3, window=1, total=2)
    w = CompletionWindow(0, window=2, total=2)
    with pytest.raises(ValueError):
        w.saved(1)  # nothing is done yet: the journal may not claim it


@given(
    sizes=st.lists(st.integers(0, 3), max_size=25),
    window=st.integers(1, 6),
    data=st.data(),
)
def test_any_completion_order_keeps_the_crash_bound(
    sizes: list[int], window: int, data: st.DataObject
) -> None:
    """Whatever order results come in: a set opens only below persisted + window (so a
    crash leaves at most a window half done), a saved mark never passes an unfinished
    set, marks only grow, no save while the rest fits in the window, and the pass ends
    with every set done and the last mark within a window of the end (the driver saves
    the end)."""
    total = len(sizes)
    w = CompletionWindow(0, window, total)
    inflight: list[int] = []
    done_sets: set[int] = set()
    left = dict(enumerate(sizes))
    marks = [0]

    def finish_one() -> None:
        i = inflight.pop(data.draw(st.integers(0, len(inflight) - 1)))
        w.succeeded(i)
        left[i] -= 1
        if left[i] == 0:
            done_sets.add(i)

    while True:
        step = w.poll()
        if step.action is Action.OPEN:
            assert step.index < w.persisted + window
            w.open(step.index)
            for _ in range(sizes[step.index]):
                w.handed_out(step.index)
                inflight.append(step.index)
            w.close(step.index)
            if sizes[step.index] == 0:
                done_sets.add(step.index)
        elif step.action is Action.SAVE:
            assert step.index > marks[-1] and total > w.persisted + window
            assert all(i in done_sets for i in range(step.index))
            w.saved(step.index)
            marks.append(step.index)
        elif step.action is Action.WAIT:
            assert inflight  # waiting with nothing in flight would hang
            finish_one()
        else:
            if not inflight:
                break
            finish_one()
    assert w.low == total and done_sets == set(range(total))
    assert total <= w.persisted + window  # nothing left that a save would have let open
