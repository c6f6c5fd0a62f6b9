"""sjsonl.storage.ahead.fetch_ahead: windows of a known future read while one is consumed — in order, the
windows and bytes ahead bounded, an error raised where its window comes, nothing more read once the
iteration stops."""

from __future__ import annotations

import os
import threading
import time

import pytest

from sjsonl.errors import InvalidArgumentError
from sjsonl.storage import ahead
from sjsonl.storage.ahead import fetch_ahead, windows_under_way

DATA = bytes(range(256)) * 64


class Reads:
    """A ``read_many`` over DATA that records which windows were asked for and how many ran at once; a
    window whose first range starts at a ``held`` offset waits until ``release()``."""

    def __init__(self, held: tuple[int, ...] = ()) -> None:
        self.asked: list[int] = []
        self.running = self.most_running = 0
        self.held, self.gate = set(held), threading.Event()
        self.lock = threading.Lock()

    def __call__(self, ranges):
        with self.lock:
            self.asked.append(ranges[0][0])
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            if ranges[0][0] in self.held:
                assert self.gate.wait(30)
            return [DATA[s:e] for s, e in ranges]
        finally:
            with self.lock:
                self.running -= 1

    def release(self) -> None:
        self.gate.set()


def plan(n: int, size: int = 10):
    """Window k: two ranges of ``size`` bytes at 100k and 100k + 50."""
    return ((k, [(100 * k, 100 * k + size), (100 * k + 50, 100 * k + 50 + size)]) for k in range(n))


def settle(reads: Reads, until: int) -> None:
    """Wait (up to 30 s: a wait, never a timing assertion) for ``until`` windows to have been asked for."""
    deadline = time.monotonic() + 30
    while len(reads.asked) < until and time.monotonic() < deadline:
        time.sleep(0.005)


def test_every_window_comes_in_the_order_of_the_plan_with_its_bytes():
    got = list(fetch_ahead(Reads(), plan(40)))
    assert [k for k, _ in got] == list(range(40))
    assert all(blobs == [DATA[100 * k : 100 * k + 10], DATA[100 * k + 50 : 100 * k + 60]] for k, blobs in got)


def test_the_next_windows_are_read_while_one_is_consumed_and_no_further():
    reads = Reads()
    it = fetch_ahead(reads, plan(40), windows=3)
    assert next(it)[0] == 0
    settle(reads, 2)
    time.sleep(0.05)  # (had more been asked for, it would show now)
    assert sorted(reads.asked) == [0, 100]  # a slow start: one window ahead of the first
    assert [next(it)[0] for _ in range(3)] == [1, 2, 3]
    settle(reads, 7)
    time.sleep(0.05)
    assert sorted(reads.asked) == [100 * k for k in range(7)]  # the windows consumed and three ahead, no more
    it.close()


def test_the_windows_ahead_stop_at_the_byte_bound_but_one_always_goes():
    reads = Reads()
    it = fetch_ahead(reads, plan(40, size=30), windows=8, most_bytes=100)  # 60 bytes a window
    assert [next(it)[0] for _ in range(4)] == [0, 1, 2, 3]
    settle(reads, 6)
    time.sleep(0.05)
    assert sorted(reads.asked) == [100 * k for k in range(6)]  # two ahead (120 bytes, the second past 100)
    it.close()
    reads = Reads()
    assert [k for k, _ in fetch_ahead(reads, plan(5), most_bytes=0)] == list(range(5))
    assert reads.most_running <= 2  # (the next window is asked for before this one is waited for)


def test_a_slow_window_holds_back_the_ones_after_it_but_not_their_reads():
    reads = Reads(held=(100,))
    it = fetch_ahead(reads, plan(10), windows=4)
    assert next(it)[0] == 0
    waiting = threading.Thread(target=lambda: got.append(next(it)[0]))
    got: list[int] = []
    waiting.start()  # waits for the held window 1
    settle(reads, 4)
    assert sorted(reads.asked) == [0, 100, 200, 300] and got == []  # reads behind the held one went out
    reads.release()
    waiting.join(30)
    assert got == [1] and [k for k, _ in it] == list(range(2, 10))  # and still came out in order
    assert reads.most_running <= 5  # the window waited for and the four ahead


def test_an_error_is_raised_where_its_window_comes_after_every_window_before_it():
    def read_many(ranges):
        if ranges[0][0] == 500:
            raise OSError("window 5 failed")
        return [DATA[s:e] for s, e in ranges]

    got = []
    with pytest.raises(OSError, match="window 5 failed"):
        for k, _ in fetch_ahead(read_many, plan(20)):
            got.append(k)
    assert got == [0, 1, 2, 3, 4]


def test_stopping_early_stops_the_reads():
    reads = Reads(held=(100,))
    it = fetch_ahead(reads, plan(100), windows=4)
    assert next(it)[0] == 0
    settle(reads, 2)
    it.close()
    reads.release()
    deadline = time.monotonic() + 30
    while windows_under_way() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert windows_under_way() == 0  # the window under way ended; nothing was left queued
    assert len(reads.asked) == 2  # and nothing was asked after the close


def test_an_error_of_the_plan_comes_where_its_window_does():
    def failing_plan():
        yield from plan(3)
        raise IndexError("window 3 cannot be planned")

    got = []
    with pytest.raises(IndexError, match="window 3"):
        for k, _ in fetch_ahead(Reads(), failing_plan()):
            got.append(k)
    assert got == [0, 1, 2]


def test_the_process_bytes_ahead_are_shared_by_every_iteration(monkeypatch):
    monkeypatch.setattr(ahead, "PROCESS_BYTES", 100)
    monkeypatch.setattr(ahead, "_ahead_bytes", [0])
    first, second = Reads(), Reads()
    one = fetch_ahead(first, plan(40, size=30), windows=8)  # 60 bytes a window
    assert [next(one)[0] for _ in range(4)] == [0, 1, 2, 3]  # two windows ahead: 120 bytes of the 100
    two = fetch_ahead(second, plan(40, size=30), windows=8)
    assert [next(two)[0] for _ in range(4)] == [0, 1, 2, 3]
    settle(second, 5)
    time.sleep(0.05)
    assert sorted(second.asked) == [100 * k for k in range(5)]  # over the budget: only its next window
    one.close()
    two.close()
    assert ahead._ahead_bytes == [0]


def test_an_empty_plan_and_bad_bounds():
    assert list(fetch_ahead(Reads(), [])) == []
    with pytest.raises(InvalidArgumentError, match="windows >= 0"):
        fetch_ahead(Reads(), plan(1), windows=-1)  # (at the call, not at the first record)


def test_no_windows_ahead_reads_each_when_it_is_wanted_in_the_consuming_thread():
    reads, threads = Reads(), []
    original = reads.__call__

    def read_many(ranges):
        threads.append(threading.current_thread())
        return original(ranges)

    it = fetch_ahead(read_many, plan(10), windows=0)
    assert next(it)[0] == 0 and next(it)[0] == 1
    assert sorted(reads.asked) == [0, 100] and set(threads) == {threading.current_thread()}
    assert [k for k, _ in it] == list(range(2, 10))


def test_a_fork_while_a_reading_thread_holds_the_locks_does_not_deadlock_the_child():
    """A DataLoader may fork its workers while a window read ahead (or the filler) is inside
    ``fetcher_for`` or the pool's bookkeeping: the child gets fresh locks."""
    from sjsonl.storage import fetch

    held, release = threading.Event(), threading.Event()

    def hold():
        with fetch._FETCHERS_LOCK, ahead._lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(30)
    pid = os.fork()
    if pid == 0:  # the child: both locks must be free here
        try:
            fetch.fetcher_for("s3://bucket/key")
            ok = windows_under_way() == 0 and list(fetch_ahead(Reads(), plan(3))) != []
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    release.set()
    holder.join(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child deadlocked on a lock held by a thread at the fork")
    assert os.waitstatus_to_exitcode(status) == 0
