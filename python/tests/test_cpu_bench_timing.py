"""The attention bench's rotated timing (_time_rotated) on CPU, with a stand-in for
torch.cuda's events: every candidate is timed once per iteration, its setup run before
each of its calls, the starting candidate moving by one each time, and each candidate's
median computed over its own calls only. No GPU, no PyTorch."""

import types

from warpspec import bench_attention


def _fake_torch(clock):
    """torch.cuda.Event's stand-in: an event records clock[0], in milliseconds."""
    class Event:
        def __init__(self, enable_timing=True):
            self.t = None

        def record(self):
            self.t = clock[0]

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return other.t - self.t

    return types.SimpleNamespace(cuda=types.SimpleNamespace(Event=Event))


def test_time_rotated_order_and_medians():
    log, clock = [], [0.0]
    fake = _fake_torch(clock)
    flush = types.SimpleNamespace(zero_=lambda: log.append("flush"))

    def cand(name, cost):
        def setup():
            log.append(f"setup {name}")

        def fn():
            log.append(name)
            clock[0] += cost
        return setup, fn

    cands = [cand("a", 1.0), cand("b", 2.0), cand("c", 5.0)]
    med = bench_attention._time_rotated(cands, 4, fake, flush)
    assert med == [1.0, 2.0, 5.0]
    timed = [log[i + 1] for i, e in enumerate(log) if e == "flush"]
    assert timed == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    # each timed call: its own setup, an untimed call of itself (the lead-in), the flush,
    # then the call
    for i, e in enumerate(log):
        if e == "flush":
            name = log[i + 1]
            assert log[i - 2] == "setup " + name and log[i - 1] == name
    # warm-ups: each candidate 3 times after its setup, before any timing
    assert log[:4] == ["setup a", "a", "a", "a"]


def test_time_one_candidate():
    clock = [0.0]
    costs = iter([9.0, 9.0, 9.0, 7.0, 1.0, 7.0, 3.0, 7.0, 2.0])  # three warm-ups, then lead-in + timed x 3

    def fn():
        clock[0] += next(costs)

    assert bench_attention._time(fn, 3, _fake_torch(clock), types.SimpleNamespace(zero_=lambda: None)) == 2.0
