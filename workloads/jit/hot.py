# A hot Python function, timed by the thread that runs it.
# python hot.py SECONDS: spins in spin_hot for SECONDS, then prints
# "hot_cpu_s X", the CPU time of this thread in the loop, and its pid
# ("pid N").
import os
import sys
import time


def spin_hot(n):
    x = 0
    for i in range(n):
        x = (x * 31 + (i ^ (x >> 7))) & 0xFFFFFFFF
    return x


seconds = float(sys.argv[1])
cpu0 = time.thread_time()
end = time.monotonic() + seconds
sink = 0
while time.monotonic() < end:
    sink += spin_hot(10000)
print("hot_cpu_s", time.thread_time() - cpu0)
print("pid", os.getpid())
