"""Races between OS processes on one SQLite store (design §3-§5): nothing duplicated, nothing
lost, whoever wins."""

from __future__ import annotations

from testkit.scenarios.races import race_consolidations, race_producers, race_sweep_vs_trigger


def test_concurrent_producers_with_duplicate_and_out_of_order_events_store_each_message_once(tmp_path):
    figures = race_producers(tmp_path, producers=4, sessions=5, messages=16, seed=1)
    assert (figures["duplicated"], figures["lost"], figures["out_of_order"]) == (0, 0, 0), figures
    assert figures["duplicates_counted"] == figures["duplicates_expected"] > 0, figures


def test_the_cold_sweep_racing_a_threshold_claim_claims_each_range_once(tmp_path):
    figures = race_sweep_vs_trigger(tmp_path, sessions=30, seed=2)
    assert (figures["duplicated"], figures["lost"]) == (0, 0), figures
    assert figures["claims"] == figures["sessions"], figures


def test_two_consolidations_of_a_scope_racing_new_reflections_absorb_each_once(tmp_path):
    figures = race_consolidations(tmp_path, keys=3, initial=6, during=25)
    assert (figures["duplicated"], figures["lost"]) == (0, 0), figures
    assert figures["attempts"].get("merged", 0) >= 3, figures
