"""The JSON-lines protocol: encoding, parsing, chunked streams, the stop flag, job argv."""

from __future__ import annotations

import io
import json
import math

import pytest

from conftest import wait_for
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


def test_line_buffer_joins_chunks():
    lb = protocol.LineBuffer()
    assert lb.feed(b'{"type":"log","mess') == []
    assert lb.feed(b'age":"a"}\n{"type"') == ['{"type":"log","message":"a"}']
    assert lb.feed(b':"log","message":"b"}\n') == ['{"type":"log","message":"b"}']
    assert lb.feed(b"tail") == [] and lb.flush() == ["tail"]


def test_stop_flag_set_by_stop_line_or_eof():
    """The watcher is a thread: wait for it to get there, however busy the machine is."""
    flag = protocol.StopFlag()
    flag.watch_stdin(io.StringIO("noise\nstop\n"))
    wait_for(flag.is_set, 30, "the stop line setting the flag")
    eof = protocol.StopFlag()
    eof.watch_stdin(io.StringIO(""))
    wait_for(eof.is_set, 30, "end of input setting the flag")


def test_parse_job_argv_reports_bad_json(capsys):
    with pytest.raises(SystemExit) as exc:
        protocol.parse_job_argv(["--json-args", "{bad"])
    assert exc.value.code == 2
    msg = protocol.parse_line(capsys.readouterr().out)
    assert msg.type == "error" and "not valid JSON" in msg.text
    args, flag = protocol.parse_job_argv(["--json-args", '{"seconds": 2}'])
    assert args == {"seconds": 2} and not flag.is_set()
