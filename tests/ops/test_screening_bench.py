"""``bench.screening`` counts what the secret screen would drop of texts that hold no secret:
a flagged fact is named with its kind, and the benchmark's own fact set loses nothing."""

from __future__ import annotations

import json
import pytest

from testkit.benches import run_bench
from testkit.soak import LOCOMO


def _conversation(observations: list[str], turns: list[str]) -> dict:
    return {"conversation": {"speaker_a": "Ana", "speaker_b": "Ben",
                             "session_1": [{"speaker": "Ana", "dia_id": f"D1:{i}", "text": t}
                                           for i, t in enumerate(turns, 1)]},
            "observation": {"session_1_observation": {"Ana": [[o, "D1:1"] for o in observations]}},
            "session_summary": {"session_1_summary": "Ana and Ben talked on 8 May 2023 at 1:56 pm. Ana moved."}}


def test_a_flagged_fact_is_counted_with_its_kind(tmp_path):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([_conversation(
        ["Ana's budget is 12,000 euros.", "Ana uses credentials admin:Tr0ub4dor&3 for the router."],
        ["The meeting is at 10:30.", "The door code is 4821."])]))
    run = run_bench("screening", "--data", str(data), "--json")
    sets = json.loads(run.out.strip().splitlines()[-1])["sets"]
    assert run.code == 0, run.err
    assert (sets["locomo_observations"]["texts"], sets["locomo_observations"]["by_kind"]) == (2, {"credentials": 1})
    assert sets["locomo_turns"]["by_kind"] == {"access_code": 1}
    assert sets["locomo_summaries"] == {"texts": 2, "flagged": 0, "by_kind": {}, "examples": []}


@pytest.mark.skipif(not LOCOMO.exists(), reason="the LoCoMo dev set is not on this machine")
def test_the_benchmark_fact_set_loses_no_fact_to_the_screen():
    run = run_bench("screening", "--data", str(LOCOMO), "--json")
    figures = json.loads(run.out.strip().splitlines()[-1])
    assert figures["sets"]["locomo_observations"]["texts"] > 600
    assert figures["flagged_total"] == 0, figures["sets"]
