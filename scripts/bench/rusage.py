#!/usr/bin/env python3
"""Run a command and record the CPU it used, including the flush at exit.

usage: rusage.py OUT_FILE PID_FILE -- COMMAND [ARGS...]

Writes "utime_ns stime_ns maxrss_kib exit_status" to OUT_FILE from wait4() of the child, which covers the
child and every descendant it waited for: the same numbers /usr/bin/time prints, at microsecond resolution.
(With tick accounting the kernel scales utime/stime so that their sum is the task's exact run time.)
The child's pid goes to PID_FILE as soon as it exists. SIGINT/SIGTERM sent to this wrapper are forwarded to
the child. The child starts with SIGINT/SIGTERM at their defaults: a job started with `&` from a script
inherits SIGINT ignored, and some tools only install their handler when SIGINT is not ignored.
"""
import os
import signal
import sys


def main() -> int:
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out_file, pid_file, argv = sys.argv[1], sys.argv[2], sys.argv[4:]
    child = 0

    def forward(signum, _frame):
        if child > 0:
            try:
                os.kill(child, signum)
            except ProcessLookupError:
                pass

    # Installed before fork: handled signals revert to SIG_DFL in the child at exec (ignored ones would not).
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as e:
            print(f"rusage.py: cannot run {argv[0]}: {e.strerror}", file=sys.stderr)
            os._exit(127)
    with open(pid_file, "w") as f:
        f.write(f"{child}\n")
    while True:
        try:
            _, status, ru = os.wait4(child, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    with open(out_file, "w") as f:
        f.write(f"{round(ru.ru_utime * 1e9)} {round(ru.ru_stime * 1e9)} {ru.ru_maxrss} {code}\n")
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
