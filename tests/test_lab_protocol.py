"""The JSON-lines protocol: encoding, parsing, the stop flag, job argv."""

from __future__ import annotations

import io
import json
import math

import pytest

from cpudoctor.lab import protocol


def test_encode_parse_round_trip_and_nan_as_null():
    line = protocol.encode("progress", step=3, loss=0.5, accuracy=0.9, samples_per_s=math.nan, elapsed=1.25)
    assert json.loads(line)["samples_per_s"] is None
    msg = protocol.parse_line(line)
    assert msg.type == "progress"
    assert msg.data == {"step": 3, "loss": 0.5, "accuracy": 0.9, "samples_per_s": None, "elapsed": 1.25}


def test_unknown_type_is_refused_on_encode():
    with pytest.raises(ValueError, match="unknown message type"):
        protocol.encode("weird", x=1)


@pytest.mark.parametrize("line", ["hello from a library", "{not json", '{"type": "other", "x": 1}', '[1, 2]'])
def test_foreign_lines_become_logs(line):
    msg = protocol.parse_line(line)
    assert msg.type == "log" and msg.text == line


def test_blank_lines_are_skipped_and_bytes_accepted():
    assert protocol.parse_line("  \n") is None
    assert protocol.parse_line(b'{"type":"error","message":"boom","kind":"data"}\n').text == "boom"


def test_emit_writes_one_flushed_line():
    buf = io.StringIO()
    protocol.emit("result", stream=buf, status="ok", steps=2)
    assert buf.getvalue().count("\n") == 1
    assert protocol.parse_line(buf.getvalue()).data == {"status": "ok", "steps": 2}


def test_stop_flag_set_by_stop_line_or_eof():
    flag = protocol.StopFlag()
    flag.watch_stdin(io.StringIO("noise\nstop\n"))
    for _ in range(100):
        if flag.is_set():
            break
        import time
        time.sleep(0.01)
    assert flag.is_set()
    eof = protocol.StopFlag()
    eof.watch_stdin(io.StringIO(""))
    import time
    time.sleep(0.05)
    assert eof.is_set()


def test_parse_job_argv_reports_bad_json(capsys):
    with pytest.raises(SystemExit) as exc:
        protocol.parse_job_argv(["--json-args", "{bad"])
    assert exc.value.code == 2
    msg = protocol.parse_line(capsys.readouterr().out)
    assert msg.type == "error" and "not valid JSON" in msg.text
    args, flag = protocol.parse_job_argv(["--json-args", '{"seconds": 2}'])
    assert args == {"seconds": 2} and not flag.is_set()
