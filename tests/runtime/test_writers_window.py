"""max_writers_in_window: writers counted by when they wrote, not when an observer took them."""

from asap_ros.testing.ros_system import LowCmdSample, max_writers_in_window

MS = 1_000_000


def test_samples_taken_together_but_written_apart_are_one_writer_at_a_time() -> None:
    # an observer held up 250 ms takes the deploy node's last command and the supervisor's first
    # damping in one take (arrival stamps 1 ns apart); they were written 230 ms apart
    taken = [LowCmdSample(1000 * MS, 1, False, 500 * MS), LowCmdSample(1000 * MS + 1, 2, True, 730 * MS)]
    assert max_writers_in_window(taken) == 1


def test_two_writers_within_20_ms_are_counted_in_write_order() -> None:
    samples = [LowCmdSample(100 * MS, 2, True, 100 * MS), LowCmdSample(101 * MS, 2, True, 110 * MS),
               LowCmdSample(102 * MS, 1, False, 105 * MS)]  # arrived last, written between the two
    assert max_writers_in_window(samples) == 2
    assert max_writers_in_window([LowCmdSample(100 * MS, 1, False), LowCmdSample(125 * MS, 2, True)]) == 1
