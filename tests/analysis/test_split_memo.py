"""The session table and the time splits are built once per span table: a second caller gets the same figures
(the analysis and the replay's human-wait clock of one report share them), a different session list or span
table is computed afresh."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from agentprof.analysis.calls import _session_table, session_table
from agentprof.analysis.timesplit import _session_splits, session_splits
from agentprof.importers import load_any

KVCT = Path(__file__).resolve().parents[2] / "traces" / "samples" / "kv-cache-tester"


def test_splits_and_session_table_are_shared_and_equal_a_fresh_computation() -> None:
    spans = load_any(str(KVCT)).spans
    sessions = session_table(spans)
    assert session_table(spans).equals(sessions) and sessions.equals(_session_table(spans))
    df, conv = session_splits(spans, sessions, imported=True)
    df2, conv2 = session_splits(spans, session_table(spans), imported=True)
    assert df2 is df and conv2 == conv and conv2 is not conv  # the memo answered; its dict is not handed out
    fresh_df, fresh_conv = _session_splits(spans, sessions, True)
    assert df.equals(fresh_df) and conv == fresh_conv
    some = sessions.head(3)
    df3, conv3 = session_splits(spans, some, imported=True)  # another session list: computed afresh
    assert df3.height == 3 and set(conv3) == set(some.get_column("conversation_id").to_list())
    other = spans.filter(pl.col("trace_id") == spans.get_column("trace_id")[0])  # another span table
    assert session_table(other).height == 1
