# Helpers for the system scenarios (sourced by run-scenarios before each scenario, in the scenario's
# own bash). A scenario exits non-zero on its first failed expectation, with the reason.
# shellcheck shell=bash
set -uo pipefail
examples=/usr/local/share/memwarn

note() { echo "  $*"; }
# To standard error (the console too): a failure inside a command substitution is still seen.
fail() { echo "  FAILED: $*" >&2; exit 1; }
# The runner's bound sends SIGTERM: exit, so that a scenario's EXIT trap (its clean-up) runs.
trap 'exit 143' TERM
expect() {  # expect "what failed" command...
    local what="$1"
    shift
    "$@" || fail "$what"
}

# The memory.events counter KEY of a cgroup directory (0 when the file or the key is missing).
memory_event() {
    awk -v key="$2" '$1 == key { print $2; found = 1 } END { if (!found) print 0 }' "$1/memory.events" 2>/dev/null || echo 0
}

# A PSI line of a cgroup's memory.pressure: "some avg10=… total=…".
pressure_line() { grep "^$2 " "$1/memory.pressure" 2>/dev/null || echo "$2 (unreadable)"; }


# The journal's position now: a run's lines are those from it on. (A unit's invocation id is no
# filter: journald reads it from the cgroup, gone once a short run ended. --cursor, not
# --after-cursor: with a unit filter, systemd before 255 skips the first matching entry after it.)
journal_mark() { journalctl -n 0 --show-cursor --no-pager 2>/dev/null | sed -n 's/^-- cursor: //p'; }

# The JSON lines a unit wrote since a mark (the journal flushed first).
unit_lines() {  # unit mark
    journalctl --sync 2>/dev/null
    journalctl -o cat --no-pager -u "$1" --cursor="$2" | grep '^{' || true
}

# Waits for the first line a unit wrote since a mark that matches an extended regex, at most
# SECONDS; prints it and returns 0, or returns 1 when none came. Follows the journal (no polling).
wait_for_line() {  # unit mark pattern seconds
    local line fd follower
    exec {fd}< <(timeout "$4" journalctl -f -o cat --no-pager -u "$1" --cursor="$2")
    follower=$!
    line="$(grep -m1 -E "$3" <&"$fd")"
    exec {fd}<&-
    kill "$follower" 2>/dev/null
    [ -n "$line" ] && echo "$line"
}

# Installs a unit file of the examples unchanged (as a user copies it), plus an optional drop-in.
install_example_unit() {  # name [drop-in text]
    cp "$examples/systemd/$1" /etc/systemd/system/
    if [ $# -gt 1 ]; then
        mkdir -p "/etc/systemd/system/$1.d"
        printf '%s\n' "$2" >"/etc/systemd/system/$1.d/system-vm.conf"
    fi
}

# Installs my-service.service of the examples as NAME.service (its name, runtime directory and
# XDG_RUNTIME_DIR renamed, nothing else changed), with a drop-in and its executable (below).
install_service_copy() {  # name drop-in-text [probe path]
    sed "s/my-service/$1/g" "$examples/systemd/my-service.service" >"/etc/systemd/system/$1.service"
    mkdir -p "/etc/systemd/system/$1.service.d"
    printf '%s\n' "$2" >"/etc/systemd/system/$1.service.d/system-vm.conf"
    install_probe_executable "$1" "${3:-}"
}

# Writes /usr/local/bin/NAME: the unit's executable, which runs memwarn-growth-probe (by default
# /usr/local/bin's) with the arguments of /etc/memwarn-system/NAME.args (a service written as the
# README teaches).
install_probe_executable() {  # name [probe path]
    mkdir -p /etc/memwarn-system
    cat >"/usr/local/bin/$1" <<WRAPPER
#!/bin/sh
# shellcheck disable=SC2046
exec ${2:-/usr/local/bin/memwarn-growth-probe} \$(cat /etc/memwarn-system/$1.args)
WRAPPER
    chmod 0755 "/usr/local/bin/$1"
}
probe_arguments() { echo "${*:2}" >"/etc/memwarn-system/$1.args"; }

# A unit's result after it ended: success, oom-kill, signal, exit-code…
unit_result() { systemctl show -p Result --value "$1"; }

# Starts a unit and waits until it has ended (systemctl's --wait follows it over D-Bus), at most
# SECONDS. Prints nothing; the result is unit_result's.
run_unit_to_end() {  # unit seconds
    timeout "$2" systemctl start --wait "$1" >/dev/null 2>&1
    local status=$?
    [ "$status" -eq 124 ] && { systemctl kill "$1" 2>/dev/null; fail "$1 did not end within $2 s"; }
    return 0
}

# MiB, one decimal, from bytes.
mib() { jq -n "$1 / 1048576 | . * 10 | round / 10"; }

# The agent's promise, from its JSON records on stdin: every round ordered by the kernel's count
# (largest first) and every ask the service its round ranked there. Prints the breaches, one a
# line (none: kept). How far down the order a round goes depends on the machine's pace, and is
# not judged.
agent_order_breaches() {
    jq -rs '
        ([.[] | select(.event == "round") | .order | select((map(.usageBytes)) != (map(.usageBytes) | sort | reverse))
          | "a round out of order: \(map(.usageBytes))"]
        + (reduce .[] as $r ({order: null, bad: []};
            if $r.event == "round" then .order = $r.order
            elif $r.event == "ask" and (.order == null or .order[$r.rank - 1].cgroup != $r.cgroup)
            then .bad += ["ask #\($r.rank) of \($r.cgroup) against its round \(.order | map(.cgroup))"]
            else . end) | .bad))[]'
}
