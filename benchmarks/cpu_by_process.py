"""Where a sweep's CPU time goes, by process: `python -m hfsweep ARGS` run while every process on
the machine is sampled from /proc, then the CPU seconds of the sweep's processes summed by role
(the driver, each kind of Ray actor, Ray's daemons), beside the machine's busy time over the run.

    python benchmarks/cpu_by_process.py [HFSWEEP OVERRIDES...]

A process that ends between two samples loses at most one interval (0.25 s) of its time; the
machine's busy figure (from /proc/stat) has no such loss, so the gap between the two is that.
Run it on an idle machine: other processes' time is left out by pid, but they share the cores.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / TICK  # all but idle and iowait


def processes() -> dict[int, tuple[str | None, float]]:
    """pid -> (role, CPU seconds so far) of every process now; the role from its command line
    (None once it has ended and has none)."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
            cmdline = open(f"/proc/{pid}/cmdline").read().replace("\0", " ").strip()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        found[int(pid)] = (role(cmdline, comm) if cmdline else None, (int(fields[11]) + int(fields[12])) / TICK)
    return found


def role(cmdline: str, comm: str) -> str:
    if cmdline.startswith("ray::"):
        return cmdline.split()[0].split(".")[0]  # ray::TrainController.run -> ray::TrainController
    if "-m hfsweep" in cmdline:
        return "driver (python -m hfsweep)"
    if "default_worker.py" in cmdline:
        return "Ray worker process, starting"
    if "multiprocessing" in cmdline or "spawn_main" in cmdline:
        return "driver's spawned process"
    for daemon in ("gcs_server", "raylet", "dashboard", "log_monitor", "monitor.py", "runtime_env"):
        if daemon in cmdline:
            return f"Ray daemon: {daemon}"
    return comm


def main() -> None:
    before = set(processes())
    busy0, start = machine_busy_seconds(), time.time()
    run_dir = tempfile.mkdtemp(prefix="cpu-by-process-")
    sweep = subprocess.Popen(
        [sys.executable, "-m", "hfsweep", f"hydra.run.dir={run_dir}", *sys.argv[1:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seen: dict[int, tuple[str, float]] = {}
    while sweep.poll() is None:
        for pid, (name, cpu) in processes().items():
            if pid in before:
                continue
            known = seen.get(pid, (None, 0))[0]
            # an idle Ray worker becomes an actor; an ended one keeps only a truncated name
            keep = known and (name is None or (name == "ray::IDLE" and known != "ray::IDLE"))
            seen[pid] = (known if keep else name or "?", cpu)
        time.sleep(0.25)
    wall, busy = time.time() - start, machine_busy_seconds() - busy0
    by_role = collections.defaultdict(list)
    for name, cpu in seen.values():
        by_role[name].append(cpu)
    print(f"python -m hfsweep {' '.join(sys.argv[1:])}: rc {sweep.returncode}, wall {wall:.1f} s")
    print(f"machine busy {busy:.1f} CPU s of {wall * os.cpu_count():.1f} ({os.cpu_count()} cores)")
    print(f"sweep's processes, sampled: {sum(sum(v) for v in by_role.values()):.1f} CPU s")
    for name, cpus in sorted(by_role.items(), key=lambda item: -sum(item[1])):
        if sum(cpus) >= 0.5:
            each = ", ".join(f"{cpu:.1f}" for cpu in cpus)
            print(f"{sum(cpus):7.1f} s  {len(cpus):3d} processes  {name}  (each: {each})")


if __name__ == "__main__":
    main()
