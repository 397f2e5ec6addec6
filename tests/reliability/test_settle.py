"""How the scenarios wait for the pipeline (``testkit.waiting.settle``): as long as its
state keeps changing, however slow; never past a stretch in which it stands still undone."""

from __future__ import annotations

import itertools
import time

from testkit.waiting import settle


class _SlowPipeline:
    """Finishes one step every ``step_s``: slow, but never still for long."""

    def __init__(self, steps: int, step_s: float) -> None:
        self.steps, self.step_s, self.started = steps, step_s, time.monotonic()

    def state(self) -> int:
        return min(self.steps, int((time.monotonic() - self.started) / self.step_s))

    def done(self) -> bool:
        return self.state() == self.steps


def test_a_pipeline_that_keeps_moving_settles_however_long_it_takes():
    pipeline = _SlowPipeline(steps=6, step_s=0.3)  # 1.8 s in all, each step within the quiet
    started = time.monotonic()
    assert settle(pipeline.done, pipeline.state, quiet_s=0.6, confirm_s=0.2, interval=0.05)
    assert time.monotonic() - started >= 1.8


def test_a_pipeline_that_stands_still_short_of_done_is_not_settled():
    pipeline = _SlowPipeline(steps=6, step_s=0.3)
    pipeline.steps = 10**6  # would be done far later; stopped at step 3 instead
    stuck = lambda: min(pipeline.state(), 3)  # noqa: E731
    started = time.monotonic()
    assert not settle(lambda: False, stuck, quiet_s=0.6, confirm_s=0.2, interval=0.05)
    assert time.monotonic() - started < 0.9 + 0.6 + 0.5  # three steps, the quiet, slack


def test_done_must_hold_twice_with_nothing_changed_in_between():
    # done at every poll, but the state changes at every one of them: work still goes on
    counter = itertools.count()
    assert not settle(lambda: True, lambda: next(counter), quiet_s=0.6, confirm_s=0.2, interval=0.05, cap_s=1.0)
