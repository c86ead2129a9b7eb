"""The preempted training job's command line and its report lines."""

from __future__ import annotations

import json

from grainfn._src.demo.preempted import emit, main


def test_emit_writes_one_json_report_line(capsys) -> None:
    emit("saved", step=3, call=0.5, committed=1.25)
    emit("finished")
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [
        {"event": "saved", "step": 3, "call": 0.5, "committed": 1.25},
        {"event": "finished"},
    ]


def test_main_without_exactly_one_config_prints_its_usage(capsys) -> None:
    assert main([]) == 2
    assert main(["{}", "{}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err.splitlines()
        == ["usage: python -m grainfn._src.demo.preempted CONFIG_JSON"] * 2
    )
