"""``asap-ros view BAG`` on a session recorded with ``asap-ros sim --record``, in a real headless
Chromium: the timeline spans the session, the episode is marked, going to it and scrubbing
through it shows the recorded pose of each moment. Heavy (a real-time recording, a browser):
run under the team lock. Screenshots go to the test's tmp_path.
"""

from __future__ import annotations

import numpy as np
import pytest

from asap_ros.testing.browser import ViewBrowser, region_change, robot_region_change
from asap_ros.testing.view_process import ViewProcess

MODE = '[data-view="mode"]'
CLOCK = '[data-view="clock"]'


def clock_s(text: str) -> float:
    """``t = 12.34 s of 23.30 s`` -> 12.34"""
    return float(text.split()[2])


def scrub_to(browser: ViewBrowser, t_s: float) -> None:
    """Type a time into the timeline's number box, as an operator would."""
    box = browser.page.locator('input[inputmode="decimal"]').first
    box.fill(f"{t_s:.2f}")
    box.press("Enter")
    browser.wait_text(CLOCK, lambda text: abs(clock_s(text) - t_s) < 0.015, 30.0)


def test_replay_scrubs_to_the_episode_and_shows_its_poses(sim_session_bag, tmp_path):
    from asap_ros.export.bag import SessionBag
    from asap_ros.view.replay import load_session

    session = load_session(sim_session_bag)
    (episode,) = SessionBag(sim_session_bag).episodes()
    start_s = (episode.start_ns - session.start_ns) / 1e9
    view = ViewProcess([str(sim_session_bag)], tmp_path / "view.log")
    try:
        view.wait_served()
        with ViewBrowser(view.url, tmp_path) as browser:
            browser.open()
            slider = browser.page.get_by_role("slider").first
            assert float(slider.get_attribute("aria-valuemin")) == 0.0
            assert abs(float(slider.get_attribute("aria-valuemax")) - session.duration_s) < 0.02
            assert browser.page.get_by_text("E1", exact=True).count() == 1, "the episode is not marked on the timeline"
            before = browser.wait_text(MODE, lambda text: text != "—", 30.0)
            assert before in ("PASSIVE", "STAND_UP"), before

            labelled_row = browser.page.locator("div.mantine-Flex-root", has=browser.page.get_by_text("go to episode", exact=True))
            labelled_row.locator("input").first.click()
            browser.page.get_by_role("option").filter(has_text="1: kick_level1").click()
            at = clock_s(browser.wait_text(CLOCK, lambda text: clock_s(text) >= start_s, 30.0))
            assert at - start_s < 0.1, (at, start_s)
            assert browser.wait_text(MODE, lambda text: text == "TRACKING", 30.0)
            assert browser.text('[data-view="motion"]') == "kick_level1 (episode 1)"
            early = browser.screenshot(tmp_path / "replay_episode_start.png")
            early_phase = float(browser.text('[data-view="phase"]'))

            scrub_to(browser, start_s + 2.0)
            assert browser.text(MODE) == "TRACKING"
            assert browser.text('[data-view="reference"]') == "ghost shown"
            late_phase = float(browser.text('[data-view="phase"]'))
            assert late_phase > early_phase + 0.3, (early_phase, late_phase)
            late = browser.screenshot(tmp_path / "replay_episode_2s.png")
            assert "episode 1: kick_level1" in browser.page.inner_text("body"), "the plots show the episode"

            union, changed = robot_region_change(early, late)
            print(f"\nrobot region {union}: {changed:.1%} of its pixels changed from phase {early_phase} to {late_phase}")
            assert changed > 0.02

            scrub_to(browser, start_s + 2.0)  # the same moment again: the same picture
            again = browser.screenshot(tmp_path / "replay_episode_2s_again.png")
            assert region_change(late, again, union) < 0.01
            assert not browser.outside_requests, browser.outside_requests
    finally:
        assert view.close() == 0, view.log_tail()
    assert np.isfinite(session.steps.q_measured).all()


def test_replay_moments_of_a_recorded_session(sim_session_bag):
    """The replay's data of a real recording: the timeline's moments show the recorded pose,
    mode and phase, the plots the episode's steps against the clip."""
    from asap_ros.export.bag import SessionBag
    from asap_ros.view.replay import SessionMoments, load_session

    session = load_session(sim_session_bag)
    (episode,) = SessionBag(sim_session_bag).episodes()
    moments = SessionMoments(session)
    start_s = (episode.start_ns - session.start_ns) / 1e9
    inside = moments.snapshot(start_s + 1.0)
    assert inside.mode == "TRACKING" and inside.motion == "kick_level1" and inside.episode == 1
    assert 0.0 < inside.phase < 1.0 and inside.reference is not None and inside.timing is not None
    before = moments.snapshot(0.5)
    assert before.mode != "TRACKING" and before.reference is None and before.phase is None
    assert not np.allclose(inside.robot.q, moments.snapshot(start_s + 2.5).robot.q)
    rows, title = moments.plot_rows(start_s + 1.0)
    assert title == "episode 1: kick_level1" and len(rows) > 150
    assert np.isfinite(moments.q_reference[rows]).all() and np.isfinite(session.steps.raw_action[rows]).all()
    assert session.duration_s == pytest.approx((session.end_ns - session.start_ns) / 1e9)
