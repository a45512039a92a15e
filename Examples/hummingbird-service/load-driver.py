#!/usr/bin/env python3
"""Drives hummingbird-service past its memory limit on loopback; prints a JSON summary.

Standard library only. Three phases:
  1. renders  -- GET /reports/<new id>?user=<u> and /users/<u>/dashboard from --render-threads
                 threads: the render cache grows until memwarn releases it (warning, critical).
  2. overload -- the renders go on, and --job-threads threads POST /jobs bodies of --job-kib KiB as
                 fast as the service takes them: far faster than its worker drains, so what the
                 service holds climbs until memwarn reports memory exhausted and the service sheds.
  3. recover  -- no load; the service must answer GET /reports/0 with 200 again within
                 --recover-seconds (the queue drained, memory no longer exhausted).
With --burst N the phases are instead one burst: N POST /jobs of --burst-kib KiB, --burst-concurrency
at a time from the start (work arriving faster than any reading of usage), then the recovery, where
GET /healthz must answer too.
Then one scrape of /metrics. The summary (stdout, JSON) has the counts by answer, the 503s with
and without Retry-After, connection failures, the metrics read, and whether it still answered.
Progress (one line a second, from GET /status) goes to stderr.
"""
import argparse
import http.client
import json
import re
import sys
import threading
import time


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--render-threads", type=int, default=3)
    parser.add_argument("--job-threads", type=int, default=4)
    parser.add_argument("--job-kib", type=int, default=256)
    parser.add_argument("--render-seconds", type=float, default=8)
    parser.add_argument("--overload-seconds", type=float, default=20)
    parser.add_argument("--recover-seconds", type=float, default=30)
    parser.add_argument("--burst", type=int, default=0, help="POSTs of the burst (0: the phases above)")
    parser.add_argument("--burst-concurrency", type=int, default=32)
    parser.add_argument("--burst-kib", type=int, default=6144)
    return parser.parse_args()


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.answers = {}               # "GET /reports 200" -> count
        self.shed_with_retry_after = 0
        self.shed_without_retry_after = 0
        self.retry_after_values = set()
        self.connection_failures = 0
        self.refused_in_a_row = 0       # the service is gone when this keeps growing
        self.peak = {"jobBytes": 0, "renderBytes": 0, "jobsQueued": 0}
        self.exhausted_seen = False
        self.levels_seen = set()

    def answer(self, route, status, headers):
        with self.lock:
            key = f"{route} {status}"
            self.answers[key] = self.answers.get(key, 0) + 1
            self.refused_in_a_row = 0
            if status == 503:
                retry_after = headers.get("Retry-After")
                if retry_after:
                    self.shed_with_retry_after += 1
                    self.retry_after_values.add(retry_after)
                else:
                    self.shed_without_retry_after += 1

    def failure(self, refused):
        with self.lock:
            self.connection_failures += 1
            if refused:
                self.refused_in_a_row += 1


class Client:
    """One keep-alive connection, reopened after any failure."""

    def __init__(self, host, port, stats):
        self.host, self.port, self.stats = host, port, stats
        self.connection = None

    def request(self, method, path, route, body=None):
        try:
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
            headers = {"Content-Type": "application/octet-stream"} if body is not None else {}
            self.connection.request(method, path, body=body, headers=headers)
            response = self.connection.getresponse()
            response.read()
            self.stats.answer(route, response.status, response.headers)
            if response.getheader("Connection", "").lower() == "close":
                self.close()
            return response.status
        except (ConnectionRefusedError, FileNotFoundError):
            self.stats.failure(refused=True)
            self.close()
            time.sleep(0.05)
        except (OSError, http.client.HTTPException):
            # A shed POST may be answered before its body was read, and the server may then
            # close the connection under the rest of the body: a reset, not a dead service.
            self.stats.failure(refused=False)
            self.close()
        return None

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def run_renders(arguments, stats, stop, counter, index):
    client = Client(arguments.host, arguments.port, stats)
    while not stop.is_set():
        with counter["lock"]:
            report = counter["next"]
            counter["next"] += 1
        user = f"u{report % arguments.users}"
        client.request("GET", f"/reports/{report}?user={user}", "GET /reports")
        if report % 4 == index % 4:
            client.request("GET", f"/users/{user}/dashboard", "GET /dashboard")
    client.close()


def run_jobs(arguments, stats, stop, index):
    client = Client(arguments.host, arguments.port, stats)
    body = bytes([index % 251]) * (arguments.job_kib * 1024)
    while not stop.is_set():
        client.request("POST", "/jobs", "POST /jobs", body=body)
    client.close()


def run_burst(arguments, stats, left, index):
    """POSTs from the shared count until it is spent; a new connection for each (as a burst of
    clients would)."""
    body = bytes([index % 251]) * (arguments.burst_kib * 1024)
    while True:
        with left["lock"]:
            if left["count"] == 0:
                return
            left["count"] -= 1
        client = Client(arguments.host, arguments.port, stats)
        client.request("POST", "/jobs", "POST /jobs", body=body)
        client.close()
        if service_gone(stats):
            return


def fetch(arguments, path, timeout=5):
    connection = http.client.HTTPConnection(arguments.host, arguments.port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def watch_status(arguments, stats, stop, started):
    while not stop.is_set():
        try:
            status, text = fetch(arguments, "/status", timeout=2)
            state = json.loads(text) if status == 200 else {}
        except (OSError, http.client.HTTPException, ValueError):
            state = {}
        with stats.lock:
            for key in stats.peak:
                stats.peak[key] = max(stats.peak[key], state.get(key, 0))
            if state.get("exhausted"):
                stats.exhausted_seen = True
            if "level" in state:
                stats.levels_seen.add(state["level"])
            answered = dict(stats.answers)
        mib = lambda key: state.get(key, 0) / 1048576
        print(f"load {time.monotonic() - started:5.1f} s  level {state.get('level', '?'):8} "
              f"exhausted {str(state.get('exhausted', '?')):5}  renders {mib('renderBytes'):6.1f} MiB  "
              f"jobs {state.get('jobsQueued', 0):4} ({mib('jobBytes'):6.1f} MiB)  "
              f"202s {answered.get('POST /jobs 202', 0):5}  503s {sum(v for k, v in answered.items() if k.endswith(' 503')):5}  "
              f"failures {stats.connection_failures}", file=sys.stderr, flush=True)
        stop.wait(1.0)


def service_gone(stats):
    with stats.lock:
        return stats.refused_in_a_row >= 20


def main():
    arguments = parse_arguments()
    stats = Stats()
    started = time.monotonic()
    stop_watch, stop_renders, stop_jobs = threading.Event(), threading.Event(), threading.Event()
    counter = {"lock": threading.Lock(), "next": 1}
    threads = [threading.Thread(target=watch_status, args=(arguments, stats, stop_watch, started), daemon=True)]
    threads += [threading.Thread(target=run_renders, args=(arguments, stats, stop_renders, counter, i), daemon=True)
                for i in range(arguments.render_threads)]
    for thread in threads:
        thread.start()

    def wait(seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not service_gone(stats):
            time.sleep(0.1)

    if arguments.burst > 0:                                          # 1-2. one burst
        left = {"lock": threading.Lock(), "count": arguments.burst}
        jobs = [threading.Thread(target=run_burst, args=(arguments, stats, left, i), daemon=True)
                for i in range(arguments.burst_concurrency)]
        for thread in jobs:
            thread.start()
        for thread in jobs:
            thread.join()
    else:
        wait(arguments.render_seconds)                               # 1. renders
        jobs = [threading.Thread(target=run_jobs, args=(arguments, stats, stop_jobs, i), daemon=True)
                for i in range(arguments.job_threads)]
        for thread in jobs:
            thread.start()
        wait(arguments.overload_seconds)                             # 2. overload
    stop_jobs.set()
    stop_renders.set()
    for thread in jobs + threads[1:]:
        thread.join(timeout=15)
    load_seconds = time.monotonic() - started

    answering, recovered_after, healthy = False, None, False         # 3. recover
    recover_started = time.monotonic()
    while time.monotonic() - recover_started < arguments.recover_seconds:
        try:
            status, _ = fetch(arguments, "/reports/0")
            if status == 200:
                answering, recovered_after = True, time.monotonic() - recover_started
                break
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.25)
    try:
        healthy = fetch(arguments, "/healthz")[0] == 200
    except (OSError, http.client.HTTPException):
        pass
    stop_watch.set()

    metrics = {}
    families, helped = set(), set()
    try:
        status, text = fetch(arguments, "/metrics")
        for line in text.splitlines():
            described = re.match(r'^# (HELP|TYPE) (memwarn_\w+) ', line)
            if described:
                (helped if described.group(1) == "HELP" else families).add(described.group(2))
            match = re.match(r'^(memwarn_\w+|service_\w+)(\{[^}]*\})?\s+(\S+)$', line)
            if match:
                metrics[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    except (OSError, http.client.HTTPException):
        pass

    def metric_sum(name):
        return sum(value for key, value in metrics.items() if key == name or key.startswith(name + "{"))

    with stats.lock:
        summary = {
            "answers": stats.answers,
            "accepted_jobs": stats.answers.get("POST /jobs 202", 0),
            "shed_with_retry_after": stats.shed_with_retry_after,
            "shed_without_retry_after": stats.shed_without_retry_after,
            "retry_after_values": sorted(stats.retry_after_values),
            "connection_failures": stats.connection_failures,
            "service_gone": stats.refused_in_a_row >= 20,
            "exhausted_seen": stats.exhausted_seen,
            "levels_seen": sorted(stats.levels_seen),
            "peak": stats.peak,
            "load_seconds": round(load_seconds, 1),
            "answering_at_end": answering,
            "healthz_at_end": healthy,
            "burst": arguments.burst,
            "recovered_after_seconds": None if recovered_after is None else round(recovered_after, 2),
            "released_bytes_total": metric_sum("memwarn_released_bytes_total"),
            "released_bytes_by_tier": {key: value for key, value in metrics.items()
                                       if key.startswith("memwarn_released_bytes_total{")},
            "releases_total": metric_sum("memwarn_releases_total"),
            "exhaustions_total": metric_sum("memwarn_exhaustions_total"),
            "requests_shed_total": metric_sum("service_requests_shed_total"),
            "metrics_scraped": bool(metrics),
            "memwarn_families": sorted(families),
            "memwarn_families_without_help": sorted(families - helped),
        }
    print(json.dumps(summary, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
