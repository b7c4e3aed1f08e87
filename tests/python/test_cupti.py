"""daydream.cupti: the in-process CUPTI collector from Python.

Without a GPU the real libcuda is absent, so the collector must refuse with a
clear DaydreamError. End to end it runs against the fake libcuda/libcupti the
C++ tests use (tests/cpp/trace/cupti/fake_cupti.cc), which `make py-test`
builds and names in $DAYDREAM_FAKE_CUPTI_LIBRARY.
"""
from __future__ import annotations

import ctypes
import os
import struct

import pytest

import daydream
from daydream import DaydreamError, cupti

FAKE = os.environ.get("DAYDREAM_FAKE_CUPTI_LIBRARY", "")
needs_build = pytest.mark.skipif(not cupti.available(), reason="daydream built without CUPTI headers")
needs_fake = pytest.mark.skipif(not (cupti.available() and FAKE and os.path.exists(FAKE)),
                                reason="the fake CUPTI library was not built (make py-test builds it)")

RUNTIME = 5          # CUPTI_ACTIVITY_KIND_RUNTIME
LAUNCH_KERNEL = 211  # CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000


def test_available_says_whether_the_build_has_cupti() -> None:
    assert isinstance(cupti.available(), bool)
    assert daydream.cupti is cupti


def test_options_are_checked_before_anything_loads() -> None:
    with pytest.raises(DaydreamError, match="buffer_mb must be in"):
        cupti.Collector(buffer_mb=0)
    with pytest.raises(DaydreamError, match="max_buffers must be at least 1"):
        cupti.Collector(max_buffers=0)


@needs_build
def test_without_a_driver_the_collector_refuses_with_a_clear_error(tmp_path) -> None:
    missing = str(tmp_path / "libcuda.so.1")
    with pytest.raises(DaydreamError, match="no CUDA driver/device") as e:
        cupti.Collector(driver_library=missing)
    assert missing in str(e.value)


@pytest.fixture
def fake():
    lib = ctypes.CDLL(FAKE)
    lib.FakeCuptiReset()
    lib.FakeCudaSetDevices(1, 0)
    return lib


def queue_launch(lib, start_ns: int, end_ns: int, correlation: int) -> None:
    # CUpti_ActivityAPI: kind, cbid, start, end, processId, threadId, correlationId, returnValue.
    record = struct.pack("<IIQQIIII", RUNTIME, LAUNCH_KERNEL, start_ns, end_ns, 1, 2, correlation, 0)
    lib.FakeCuptiQueueRecord(record, ctypes.c_size_t(len(record)))


@needs_fake
def test_collector_records_between_start_and_stop_and_hands_over_a_trace(fake) -> None:
    rec = cupti.Collector(driver_library=FAKE, cupti_library=FAKE)
    assert "fake_cupti" in rec.cupti_path and rec.cupti_version > 0
    assert not rec.recording
    with rec:
        assert rec.recording
        queue_launch(fake, 1_000, 6_000, 1)
        queue_launch(fake, 7_000, 9_000, 2)
    assert not rec.recording
    trace = rec.trace()
    assert isinstance(trace, daydream.Trace)
    s = trace.summary()
    assert s["events_by_kind"] == {"cuda_runtime": 2}
    assert s["devices"][0]["name"] == "Fake GPU 0"
    with pytest.raises(DaydreamError, match="CUPTI recorded no kernel"):
        rec.trace()  # taken: the collector starts over empty


@needs_fake
def test_collector_refuses_misuse_with_daydream_errors(fake) -> None:
    rec = cupti.Collector(driver_library=FAKE, cupti_library=FAKE)
    with pytest.raises(DaydreamError):
        rec.stop()  # not recording
    rec.start()
    with pytest.raises(DaydreamError):
        rec.start()  # already recording
    other = cupti.Collector(driver_library=FAKE, cupti_library=FAKE)
    with pytest.raises(DaydreamError):
        other.start()  # CUPTI is process-wide: one collector at a time
    with pytest.raises(DaydreamError, match="still recording"):
        rec.trace()
    rec.stop()


@needs_fake
def test_external_id_tags_calls_inside_the_block(fake) -> None:
    rec = cupti.Collector(driver_library=FAKE, cupti_library=FAKE)
    with rec:
        with rec.external_id(42):
            assert fake.FakeCuptiExternalIdDepth() == 1
        assert fake.FakeCuptiExternalIdDepth() == 0
        with pytest.raises(DaydreamError):
            rec._c.pop_external_id()  # nothing pushed
