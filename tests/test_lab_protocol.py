"""The JSON-lines protocol, both ends: the child's kit (encoding, the stop flag and commands, job argv,
job_main) and the parent's reader (the one line reader of every child), which agree on one set of constants."""

from __future__ import annotations

import io
import json
import math
import sys

import pytest

from conftest import wait_for
from cpudoctor.lab import protocol
from cpudoctor.lab.jobs import _jobkit


def test_encode_parse_round_trip_and_nan_as_null():
    line = _jobkit.encode("progress", step=3, loss=0.5, accuracy=0.9, samples_per_s=math.nan, elapsed=1.25)
    assert json.loads(line)["samples_per_s"] is None
    msg = protocol.parse_line(line)
    assert msg.type == "progress"
    assert msg.data == {"step": 3, "loss": 0.5, "accuracy": 0.9, "samples_per_s": None, "elapsed": 1.25}


def test_unknown_type_is_refused_on_encode():
    with pytest.raises(ValueError, match="unknown message type"):
        _jobkit.encode("weird", x=1)


@pytest.mark.parametrize("line", ["hello from a library", "{not json", '{"type": "other", "x": 1}', '[1, 2]'])
def test_foreign_lines_become_logs(line):
    msg = protocol.parse_line(line)
    assert msg.type == "log" and msg.text == line


def test_blank_lines_are_skipped_and_bytes_accepted():
    assert protocol.parse_line("  \n") is None
    assert protocol.parse_line(b'{"type":"error","message":"boom","kind":"data"}\n').text == "boom"


def test_emit_writes_one_flushed_line():
    buf = io.StringIO()
    _jobkit.emit("result", stream=buf, status="ok", steps=2)
    assert buf.getvalue().count("\n") == 1
    assert protocol.parse_line(buf.getvalue()).data == {"status": "ok", "steps": 2}


def test_stop_flag_set_by_stop_line_or_eof():
    """The watcher is a thread: wait for it to get there, however busy the machine is."""
    flag = _jobkit.StopFlag()
    flag.watch_stdin(io.StringIO("noise\nstop\n"))
    wait_for(flag.is_set, 30, "the stop line setting the flag")
    eof = _jobkit.StopFlag()
    eof.watch_stdin(io.StringIO(""))
    wait_for(eof.is_set, 30, "end of input setting the flag")


def test_parse_job_argv_reports_bad_json(capsys):
    with pytest.raises(SystemExit) as exc:
        _jobkit.parse_job_argv(["--json-args", "{bad"])
    assert exc.value.code == 2
    msg = protocol.parse_line(capsys.readouterr().out)
    assert msg.type == "error" and "not valid JSON" in msg.text
    args, flag = _jobkit.parse_job_argv(["--json-args", '{"seconds": 2}'])
    assert args == {"seconds": 2} and not flag.is_set()


def test_measure_command_is_what_the_kit_reads():
    assert protocol.STOP_COMMAND == _jobkit.STOP_COMMAND == "stop"
    assert protocol.measure_command(0.5) == "measure 0.500"
    assert protocol.measure_command(0.5).split()[0] == _jobkit.MEASURE_COMMAND


def test_stop_flag_hands_over_commands_until_stop():
    import os

    read_fd, write_fd = os.pipe()
    reader, writer = os.fdopen(read_fd, "r"), os.fdopen(write_fd, "w")
    flag = _jobkit.StopFlag()
    flag.watch_stdin(reader)
    writer.write("measure 1.0\n\nmeasure 2.0\n")
    writer.flush()
    assert flag.next_command(timeout=10) == "measure 1.0"
    assert flag.next_command(timeout=10) == "measure 2.0"          # blank lines are no commands
    assert flag.next_command(timeout=0.05) is None and not flag.is_set()
    writer.write("stop\nmeasure 3.0\n")
    writer.close()
    assert flag.wait(10) and flag.next_command(timeout=0.1) is None   # stopped: no more commands


def test_job_main_turns_failures_into_one_error_line(capsys):
    def settings_problem(args, stop):
        raise _jobkit.JobError("batch size must be between 1 and 65536, not 0", kind="settings", exit_code=2)

    assert _jobkit.job_main(settings_problem, ["--json-args", "{}"]) == 2
    started, msg = [protocol.parse_line(x) for x in capsys.readouterr().out.splitlines()]
    assert started.type == "facts" and started.data["job_started"] is True     # first, before any import
    assert msg.type == "error" and msg.data == {"message": "batch size must be between 1 and 65536, not 0",
                                                "kind": "settings"}

    def crash(args, stop):
        raise KeyError("model")

    assert _jobkit.job_main(crash, []) == 1
    assert protocol.parse_line(capsys.readouterr().out.splitlines()[-1]).text == "KeyError: 'model'"

    def fine(args, stop):
        import warnings

        warnings.warn("this API is deprecated", DeprecationWarning)
        return {"status": "ok", "echo": args}

    assert _jobkit.job_main(fine, ["--json-args", '{"n": 1}']) == 0
    lines = [protocol.parse_line(x) for x in capsys.readouterr().out.splitlines()][1:]   # after job_started
    assert [m.type for m in lines] == ["log", "result"]                  # the warning is said, not silenced
    assert lines[0].text == "DeprecationWarning: this API is deprecated"
    # the job's figures, and which Python made them (the environment they describe)
    assert lines[1].data == {"status": "ok", "echo": {"n": 1}, "python": sys.executable,
                             "python_version": "%d.%d.%d" % sys.version_info[:3]}


def test_both_ends_spell_the_message_types_alike():
    """The child's kit is a standalone file with its own copy; the one line reader must agree with it."""
    from cpudoctor.kits.child import lines

    assert (_jobkit.PROGRESS, _jobkit.RESULT, _jobkit.LOG, _jobkit.ERROR) == \
        (lines.PROGRESS, lines.RESULT, lines.LOG, lines.ERROR)
    assert _jobkit.TYPES == lines.TYPES and _jobkit.STOP_COMMAND == lines.STOP_COMMAND
