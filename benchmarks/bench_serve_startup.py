"""Start-up time of `toolwire serve` (no config): process spawn → first 200 on /healthz.

Run: .venv/bin/python benchmarks/bench_serve_startup.py [runs]
Prints the wall time of each run and the median; also the CPU time of the child.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time

import httpx


def one_run() -> tuple[float, float]:
    env = {**os.environ, "TOOLWIRE_LOG_LEVEL": "warning", "NO_COLOR": "1", "COLUMNS": "200"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolwire.cli.main", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    url = None
    for line in proc.stdout:
        found = re.search(r"listening on (http://\S+)/v1", line)
        if found:
            url = found.group(1)
            break
    if url is None:
        raise SystemExit("toolwire serve did not start")
    with httpx.Client() as http:
        while True:
            try:
                if http.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.002)
    elapsed = time.perf_counter() - started
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=10)
    proc.stdout.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    one_run()  # warm the file cache
    results = [one_run() for _ in range(runs)]
    for i, (wall, cpu) in enumerate(results, 1):
        print(f"run {i}: ready in {wall * 1000:7.1f} ms wall, {cpu * 1000:7.1f} ms CPU (whole run)")
    walls = [w for w, _ in results]
    print(f"median: {statistics.median(walls) * 1000:.1f} ms to the first /healthz 200")


if __name__ == "__main__":
    main()
