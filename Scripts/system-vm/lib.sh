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

# Runs a unit to its end (at most 120 s) and reads what it did: sets result (its Result=), lines
# (its JSON lines) and kills (the OOM kills a slice's memory.events counted meanwhile).
run_and_read_unit() {  # unit slice-directory
    local before mark
    before="$(memory_event "$2" oom_kill)"
    mark="$(journal_mark)"
    run_unit_to_end "$1" 120
    result="$(unit_result "$1")"
    lines="$(unit_lines "$1" "$mark")"
    kills=$(($(memory_event "$2" oom_kill) - before))
}

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

# Loads a module the host script packed (the kernel's own modules are not in the VM), once.
load_module() {  # name
    [ -d "/sys/module/$1" ] || insmod "/usr/local/lib/memwarn-system/modules/$1.ko" || fail "insmod $1.ko failed"
}

# The image of Examples/container/Containerfile.prebuilt, its service memwarn-growth-probe, built
# by podman (as the user whose command is given) from the VM's static executables.
build_probe_image() {  # tag podman-command…
    local tag=$1 context=/var/lib/memwarn-system/image
    shift
    load_module overlay
    mkdir -p "$context"
    chmod 0755 /var/lib/memwarn-system "$context"
    install -m 0755 /usr/local/bin/memwarn /usr/local/bin/memwarn-growth-probe "$context/"
    "$@" build --quiet -f "$examples/container/Containerfile.prebuilt" --build-arg PRODUCT=memwarn-growth-probe -t "$tag" "$context" >/dev/null ||
        fail "$* build of $examples/container/Containerfile.prebuilt failed"
}

# What a container engine's `run --memory 128m` of the probe image gives memwarn, asserted: inside,
# memwarn status reads cgroup / and 128 MiB from memory.max and its monitor arms; the service
# survives growth to three times the limit at 40 MiB/s; without memwarn's releases, exit 137.
# Sets status (memwarn status's JSON inside) for the caller's notes.
image_checks() {  # label image engine-command…
    local label=$1 image=$2 out
    shift 2
    local run=("$@" run --rm --memory 128m --memory-swap 128m --network none)
    out="$(mktemp)"
    status="$("${run[@]}" --entrypoint /usr/local/bin/memwarn "$image" status --json 2>"$out")" ||
        fail "$label: memwarn status in the container failed: $(tail -5 "$out")"
    expect "$label: inside, memwarn status does not see cgroup / with 128 MiB from memory.max: $status" \
        test "$(jq -r .cgroupPath <<<"$status")" = / -a "$(jq -r .limitBytes <<<"$status")" = $((128 << 20)) \
        -a "$(jq -r .limitFile <<<"$status" | xargs basename)" = memory.max
    expect "$label: the monitor in the container could not be armed: $(jq -c .monitor <<<"$status")" \
        test -z "$(jq -r '.monitor.error // empty' <<<"$status")"
    note "$label: inside, memwarn status reads cgroup $(jq -r .cgroupPath <<<"$status"), limit $(mib "$(jq -r .limitBytes <<<"$status")") MiB from $(jq -r .limitFile <<<"$status"); its monitor: $(jq -r '.monitor.sources | join(" | ")' <<<"$status" | cut -c1-600)"
    local code lines releases
    "${run[@]}" "$image" --rate 40 --total 384 --log-level notice >"$out" 2>"$out.err"
    code=$?
    lines="$(grep '^{' "$out")"
    expect "$label: with memwarn the service did not survive: exit $code; $(tail -3 "$out.err")" test "$code" = 0
    releases="$(jq -s '[.[] | select(.event=="release")] | length' <<<"$lines")"
    note "$label: with memwarn, 40 MiB/s to 384 MiB under 128 MiB: survived (exit 0) in $(jq -s 'map(select(.event=="done"))[0].seconds // 0 | . * 10 | round / 10' <<<"$lines") s, $releases releases; its log: $(grep -m2 -i 'psi\|trigger' "$out.err" | cut -c1-200 | paste -sd'|')"
    "${run[@]}" "$image" --rate 40 --total 384 --releaser none >/dev/null 2>&1
    code=$?
    expect "$label: without memwarn's releases the container was not OOM-killed: exit $code" test "$code" = 137
    note "$label: counterfactual, without memwarn's releases: exit $code (OOM-killed)"
    rm -f "$out" "$out.err"
}
