"""Runs a command and measures its wall time and the peak RSS of that process alone.

A child forked from a large Python process starts with the parent's RSS high-water mark,
which Linux keeps across exec, so the child's own ru_maxrss overstates a small process (the
Fashion-MNIST pipeline read 1019 MiB that way, 33 MiB alone). GNU time (Debian's `time`)
forks the command from its own small process and reports the command's peak; without it,
ru_maxrss is what there is.
"""
import os
import subprocess
import threading
import time

GNU_TIME = "/usr/bin/time"
PEAK_MARK = "process-peak-rss-kib "


def run_with_peak(cmd, cwd=None):
    """Returns (exit code, stdout, stderr, wall seconds, peak RSS in MiB)."""
    timed = os.access(GNU_TIME, os.X_OK)
    full = [GNU_TIME, "-f", PEAK_MARK + "%M"] + list(cmd) if timed else list(cmd)
    start = time.monotonic()
    proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    # Both pipes are drained while the child runs, so a chatty child cannot block; wait4
    # reaps it with its rusage.
    chunks = {"out": b"", "err": b""}

    def drain(name, pipe):
        chunks[name] = pipe.read()

    readers = [threading.Thread(target=drain, args=("out", proc.stdout)),
               threading.Thread(target=drain, args=("err", proc.stderr))]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    for reader in readers:
        reader.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - start
    err_lines = chunks["err"].decode(errors="replace").splitlines()
    peak_kib = usage.ru_maxrss
    marks = [line for line in err_lines if line.startswith(PEAK_MARK)]
    if timed and marks:
        peak_kib = int(marks[-1][len(PEAK_MARK):])
        err_lines = [line for line in err_lines if not line.startswith(PEAK_MARK)]
    return proc.returncode, chunks["out"].decode(errors="replace"), "\n".join(err_lines), seconds, peak_kib / 1024.0
