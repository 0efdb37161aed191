"""Runs COMMAND ARGS... as a subprocess at once (fork and exec, as
subprocess does), and waits for it. usage: py_spawn.py COMMAND ARGS..."""
import subprocess
import sys

if __name__ == "__main__":
    sys.exit(subprocess.run(sys.argv[1:]).returncode)
