"""A pure-Python loop (`spin`) at the bottom of a recursion (`down`) DEPTH
calls deep, for SECONDS seconds: the frames of a deep stack, whose depth is
known by construction. usage: py_deep.py DEPTH [SECONDS]"""
import sys
import time


def spin(end):
    x = 0
    while time.monotonic() < end:
        for i in range(1000):
            x += i * i


def down(n, end):
    return spin(end) if n == 0 else down(n - 1, end)


if __name__ == "__main__":
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    down(int(sys.argv[1]), time.monotonic() + seconds)
