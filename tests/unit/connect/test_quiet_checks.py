"""How often the source connector checks a quiet grid (``bounds.QuietChecks``)."""

from __future__ import annotations

from gridstream.connect.source.bounds import QuietChecks


def due_times(checks: QuietChecks, until: float, found_at: set[int]) -> list[float]:
    """Triggers every ``poll_s`` up to ``until``; the checks made (a change found at the
    trigger indexes in ``found_at``)."""
    made = []
    step = 0
    while step * checks.poll_s < until:
        now = step * checks.poll_s
        if checks.due(now):
            made.append(round(now, 3))
            checks.checked(now, found=step in found_at)
        step += 1
    return made


def test_a_quiet_grid_is_checked_less_and_less_often_up_to_the_idle_interval() -> None:
    made = due_times(QuietChecks(100, 2000), 10.0, set())
    gaps = [round(b - a, 3) for a, b in zip(made, made[1:], strict=False)]
    assert gaps[:5] == [0.1, 0.2, 0.4, 0.8, 1.6]
    assert set(gaps[5:]) == {2.0}  # never more than the idle interval


def test_changes_flowing_are_checked_at_every_trigger() -> None:
    made = due_times(QuietChecks(100, 2000), 1.0, set(range(100)))
    assert len(made) == 10


def test_a_change_ends_the_back_off() -> None:
    checks = QuietChecks(100, 2000)
    for now in (0.0, 0.1, 0.3, 0.7):
        assert checks.due(now)
        checks.checked(now, found=False)
    assert not checks.due(1.0)
    assert checks.due(1.5)
    checks.checked(1.5, found=True)
    assert checks.due(1.6)


def test_an_idle_interval_below_the_poll_interval_means_no_back_off() -> None:
    made = due_times(QuietChecks(500, 100), 5.0, set())
    assert len(made) == 10
