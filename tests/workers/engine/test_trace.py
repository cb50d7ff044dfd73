"""Parsing XRootD client recorder CSVs: real recordings (tests/workers/engine/data, made
with the lab's xrootd, host rewritten to recorded.example) and broken ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.engine.errors import InvalidParams
from workers.engine.replay import Step, plan_steps
from workers.engine.trace import OpKind, load_trace, parse_trace, recorded_paths_at

DATA = Path(__file__).parent / "data"
# A job through the Python bindings: open, stat, 4 reads of 64 KiB 10 ms apart, a readv of
# 3 chunks, 3 async reads of 128 KiB at once, close; then a second file: a 1 MiB read, a
# read of 4 KiB at 100 bytes before the end (gets 100), close.
JOB = DATA / "recorded-job.csv"
# xrdcp of a 16 MiB file to /dev/null (Debian's xrootd-client 5.5): two PgReads of 8 MiB
# outstanding at once, and the local destination's open, stat, writes and close.
XRDCP = DATA / "xrdcp-16M.csv"
FILE_4M = "root://recorded.example:1094//fedprobe/file-4M"
FILE_1M = "root://recorded.example:1094//fedprobe/file-1M"
OPEN = '"7","Open","100.0","root://h:1094//f;16;0;0","100.1","[SUCCESS]",""'


def test_recorded_job_parses_into_its_files_opens_and_reads() -> None:
    trace = load_trace(str(JOB))

    assert trace.files == (FILE_4M, FILE_1M)
    assert trace.handle_files == (0, 1)
    kinds = [op.kind for op in trace.ops]
    assert kinds[:9] == [OpKind.OPEN, *[OpKind.READ] * 4, OpKind.READV, *[OpKind.READ] * 3]
    assert kinds[9:] == [OpKind.CLOSE, OpKind.OPEN, OpKind.READ, OpKind.READ, OpKind.CLOSE]
    assert [op.requests for op in trace.ops[1:5]] == [((k * 65536, 65536),) for k in range(4)]
    assert trace.ops[5].requests == ((1048576, 4096), (2097152, 8192), (3145728, 16384))
    assert trace.ops[5].delivered == 28672
    assert trace.ops[12].requests == ((1048476, 4096),) and trace.ops[12].delivered == 100
    assert trace.bytes_read == 4 * 65536 + 28672 + 3 * 131072 + 1048576 + 100
    assert trace.left_out == {"Stat": 1}
    assert trace.ops[0].start_s == 0.0
    assert all(a.start_s <= b.start_s for a, b in zip(trace.ops, trace.ops[1:], strict=False))
    # The recording slept 10 ms between the sequential reads.
    assert 0.009 < trace.ops[2].think_s < 0.05
    assert trace.ops[7].think_s == trace.ops[8].think_s == 0  # sent before any answer came
    assert trace.needed_sizes() == [3145728 + 16384, 1048576]


def test_overlapping_reads_of_one_open_become_one_async_step() -> None:
    steps = plan_steps(load_trace(str(JOB)))

    assert [s.step for s in steps] == [
        Step.OPEN, *[Step.READ] * 4, Step.READV, Step.ASYNC, Step.CLOSE,
        Step.OPEN, Step.READ, Step.READ, Step.CLOSE,
    ]  # fmt: skip
    async_reads = steps[6]
    assert async_reads.requests == tuple((2097152 + k * 131072, 131072) for k in range(3))
    assert async_reads.depth == 3
    assert async_reads.expected == 3 * 131072


def test_xrdcp_recording_keeps_the_remote_reads_and_leaves_the_local_file_out() -> None:
    trace = load_trace(str(XRDCP))

    assert trace.files == ("root://recorded.example:1094//fedprobe/file-16M",)
    assert [op.kind for op in trace.ops] == [OpKind.OPEN, OpKind.READ, OpKind.READ, OpKind.CLOSE]
    assert trace.bytes_read == 16 * 1024 * 1024
    # Its open, stat, two writes and close; and the remote file's stat.
    assert trace.left_out == {"local file": 5, "Stat": 1}
    steps = plan_steps(trace)
    assert [s.step for s in steps] == [Step.OPEN, Step.ASYNC, Step.CLOSE]
    assert steps[1].depth == 2


def test_recorded_paths_at_puts_the_trace_files_on_another_endpoint() -> None:
    trace = load_trace(str(JOB))

    assert recorded_paths_at(trace, "root://127.0.0.1:1094/") == (
        "root://127.0.0.1:1094//fedprobe/file-4M",
        "root://127.0.0.1:1094//fedprobe/file-1M",
    )
    assert recorded_paths_at(trace, "https://site.example:8443") == (
        "https://site.example:8443/fedprobe/file-4M",
        "https://site.example:8443/fedprobe/file-1M",
    )


def test_failed_operations_are_left_out_as_xrdreplay_f_does() -> None:
    trace = parse_trace(
        [
            '"5","Open","99.0","root://h:1094//missing;16;0;0","99.1","[ERROR] Error response: '
            'no such file or directory",""',
            OPEN,
            '"7","Read","100.2","0;10;0","100.3","[ERROR] Operation expired",""',
            '"7","Read","100.4","0;10;0","100.5","[SUCCESS]","10"',
        ]
    )

    assert trace.files == ("root://h:1094//f",)
    assert trace.left_out == {"failed Open": 1, "failed Read": 1}
    assert [op.kind for op in trace.ops] == [OpKind.OPEN, OpKind.READ]
    assert trace.ops[0].start_s == pytest.approx(1.0)  # from the first recorded start


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([OPEN, '"7","Read","100.2","0;10;0","100.3"'], "line 2: 5 fields, a recorder line has 7"),
        (['"7","Frob","1","0","2","[SUCCESS]",""'], "line 1: action 'Frob' is not one of"),
        ([OPEN.replace('"100.0"', '"soon"')], "line 1: start 'soon' is not a Unix time"),
        ([OPEN.replace('"100.1"', '"99"')], "line 1: end 99 is before start 100.0"),
        ([OPEN.replace('"7"', '"seven"')], "line 1: id 'seven' is not a whole number"),
        ([OPEN.replace(";16;", ";read;")], "line 1: Open flags 'read' is not a whole number"),
        ([OPEN.replace(";0;0", ";0")], "line 1: Open arguments are url;flags;mode;timeout"),
        ([OPEN, '"7","Read","100.2","0;x;0","100.3","[SUCCESS]","0"'], "line 2: Read size 'x'"),
        ([OPEN, '"7","Read","100.2","0;0;0","100.3","[SUCCESS]","0"'], "line 2: Read size 0 is"),
        ([OPEN, '"7","Read","100.2","0;9;0","100.3","[SUCCESS]","10"'], "line 2: Read response"),
        ([OPEN, '"7","Read","100.2","-1;9;0","100.3","[SUCCESS]","9"'], "line 2: Read offset -1"),
        ([OPEN, '"7","Read","100.2","0;9","100.3","[SUCCESS]","9"'], "line 2: Read arguments"),
        (
            [OPEN, '"7","VectorRead","100.2","0;9;20;0","100.3","[SUCCESS]","9"'],
            "line 2: VectorRead arguments are offset;size pairs",
        ),
        ([OPEN, '"8","Read","100.2","0;9;0","100.3","[SUCCESS]","9"'], "line 2: Read on file id 8"),
        (
            [
                OPEN,
                '"7","Close","100.2","0","100.3","[SUCCESS]",""',
                '"7","Read","100.4","0;9;0","100.5","[SUCCESS]","9"',
            ],
            "line 3: Read on file id 7, not open",
        ),
        ([OPEN, OPEN.replace("100.", "101.")], "line 2: Open of file id 7, open already"),
        (
            [OPEN, '"7","Write","100.2","0;9;0","100.3","[SUCCESS]",""'],
            "line 2: Write to root://h:1094//f: a replay only reads",
        ),
        ([OPEN.replace(";16;", ";36;")], "line 1: Open of root://h:1094//f for writing (flags 36)"),
        ([], "has no recorded operations"),
        ([OPEN, '"7","Close","100.2","0","100.3","[SUCCESS]"x,""'], "line 2: ',' expected after"),
        ([OPEN, '"7","Close","100.2","0","100.3","[SUCCESS]","'], "line 2: unexpected end of data"),
        ([OPEN.replace("[SUCCESS]", "[ERROR] refused")], "opens no remote file"),
    ],
)
def test_a_bad_trace_is_refused_naming_its_line_and_field(lines: list[str], message: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        parse_trace(lines)

    assert caught.value.field == "trace"
    assert message in caught.value.message


def test_a_trace_file_that_is_missing_or_not_text_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidParams, match=r"cannot read .*nothing\.csv"):
        load_trace(str(tmp_path / "nothing.csv"))
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InvalidParams, match="is not UTF-8 text"):
        load_trace(str(binary))
