"""Causal ground truth in Python: each round runs hot() then cold(), loops of
the same pure-Python work, hot() HOT iterations and cold() COLD (3:2 by
default: hot is 60% of a round), then makes one getppid() system call, the
progress point (`--progress syscall:getppid`). HOT_SCALE 0.5 halves hot's
work: the measured effect of making it twice as fast.

usage: py_hot_cold.py ROUNDS [HOT=30000] [COLD=20000] [HOT_SCALE=1]
ROUNDS 0: rounds until killed. Prints round_ns N and round_cpu_ns N, the
mean wall and CPU time of a round (the CPU time is the work's alone when
other programs share the cores), and round_cpu_median_ns N, the CPU time of
the median round: a burst of load elsewhere (which slows the work through
shared caches, or is charged to it as stolen time) spoils a few rounds, not
the median.
"""
import os
import sys
import time


def hot(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def cold(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def main():
    rounds = int(sys.argv[1])
    hot_n = int(sys.argv[2]) if len(sys.argv) > 2 else 30000
    cold_n = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    hot_n = int(hot_n * (float(sys.argv[4]) if len(sys.argv) > 4 else 1.0))
    print(f"pid {os.getpid()}", flush=True)
    done = 0
    t0, c0 = time.monotonic_ns(), time.process_time_ns()
    # Rounds until killed keep no times (their list would grow without end).
    times = [] if rounds else None
    last = c0
    while rounds == 0 or done < rounds:
        hot(hot_n)
        cold(cold_n)
        os.getppid()
        done += 1
        if times is not None:
            now = time.process_time_ns()
            times.append(now - last)
            last = now
    print(f"round_ns {(time.monotonic_ns() - t0) // done}", flush=True)
    print(f"round_cpu_ns {(time.process_time_ns() - c0) // done}", flush=True)
    if times:
        print(f"round_cpu_median_ns {sorted(times)[len(times) // 2]}", flush=True)


main()
