# An OCI container run by crun from a bundle of the static executables, made by the recipe's
# Examples/container/make-bundle from the runtime's defaults (private pid, mount, ipc, uts, network
# and cgroup namespaces; /sys/fs/cgroup mounted read-only), a non-root uid (65532, no
# capabilities), a memory limit of 128 MiB and no memory.high, placed by crun's systemd cgroup
# manager in system.slice as Podman does.
#   1. Inside, `memwarn status --json` reads the container's cgroup as / and its limit (memory.max,
#      128 MiB) as its own; the PSI trigger it cannot write (EACCES as uid 65532, EROFS as root on
#      the read-only mount) is reported among its sources, and the monitor samples instead.
#   2. memwarn-growth-probe (the README's service) survives growth to three times the limit, and
#      its log says the refused trigger once a PSI line (some, full), not again.
#   3. Counterfactual: without memwarn's releases it is OOM-killed (exit 137).
#   4. A container with no limit: memwarn measures against the host's memory and says so.
recipe="$examples/container/make-bundle"
expect "the recipe's make-bundle is missing" test -x "$recipe"
work=/var/lib/memwarn-system/containers
rm -rf "$work"
mkdir -p "$work"
cleanup() {
    for name in status status-root grow grow-unreleased unlimited; do crun --systemd-cgroup delete -f "$name" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT

# Makes a bundle by the recipe, adds the memwarn CLI to its rootfs (an image that carries both),
# and sets crun's systemd cgroup path.
make_bundle() {  # name [--memory SIZE] [--user UID] -- executable args…
    local name=$1 memory_options=()
    shift
    if [ "$1" = --memory ]; then memory_options=(--memory "$2"); shift 2; fi
    if [ "$1" = --user ]; then memory_options+=(--user "$2"); shift 2; fi
    shift  # --
    local executable=$1
    shift
    "$recipe" "${memory_options[@]}" --runtime crun "$work/$name" "/usr/local/bin/$executable" -- "$@" >/dev/null ||
        fail "make-bundle for $name failed"
    cp /usr/local/bin/memwarn "$work/$name/rootfs/memwarn"
    local config="$work/$name/config.json"
    jq --arg path "system.slice:memwarn:$name" '.linux.cgroupsPath = $path' "$config" >"$config.new" && mv "$config.new" "$config"
}
# Runs a container to its end; its standard output goes to $work/NAME.out, its error to .err.
run_container() {  # name
    timeout 150 crun --systemd-cgroup run --bundle "$work/$1" "$1" >"$work/$1.out" 2>"$work/$1.err" </dev/null
}

make_bundle status --memory 128M -- memwarn status --json
run_container status || fail "memwarn status in the container failed: $(cat "$work/status.err")"
status="$(cat "$work/status.out")"
expect "the bundle is not what the recipe says: $(jq -c '{user: .process.user, ns: [.linux.namespaces[].type], limit: .linux.resources.memory.limit}' "$work/status/config.json")" \
    test "$(jq -r '.process.user.uid' "$work/status/config.json")" = 65532
expect "inside, memwarn status does not see cgroup / with 128 MiB from memory.max: $status" \
    test "$(jq -r .cgroupPath <<<"$status")" = / -a "$(jq -r .limitBytes <<<"$status")" = $((128 << 20)) \
    -a "$(jq -r .limitFile <<<"$status" | xargs basename)" = memory.max
note "inside (uid 65532, cgroup namespace, /sys/fs/cgroup read-only): memwarn status reads cgroup $(jq -r .cgroupPath <<<"$status"), limit $(mib "$(jq -r .limitBytes <<<"$status")") MiB from $(jq -r .limitFile <<<"$status"), usage $(mib "$(jq -r .usageBytes <<<"$status")") MiB"
note "its monitor: $(jq -c '.monitor' <<<"$status" | cut -c1-600)"
note "its notes: $(jq -c '.notes' <<<"$status" | cut -c1-400)"
expect "the monitor in the container could not be armed: $(jq -c .monitor <<<"$status")" test -z "$(jq -r '.monitor.error // empty' <<<"$status")"
reported="$(jq -r '[.monitor.sources[]? | select(test("trigger refused"))] | join(" | ")' <<<"$status")"
expect "as uid 65532 the monitor does not say the PSI trigger was refused for permission: $(jq -c .monitor <<<"$status")" \
    grep -qi "permission denied" <<<"$reported"

# As root in the container (uid 0, the runtime's default capabilities): the read-only mount itself
# refuses the trigger (EROFS), where uid 65532 is refused by the file's mode first (EACCES).
make_bundle status-root --memory 128M --user 0 -- memwarn status --json
run_container status-root || fail "memwarn status as root in the container failed: $(cat "$work/status-root.err")"
expect "as root the monitor in the container could not be armed: $(jq -c .monitor "$work/status-root.out")" \
    test -z "$(jq -r '.monitor.error // empty' "$work/status-root.out")"
reported="$(jq -r '[.monitor.sources[]? | select(test("trigger refused"))] | join(" | ")' "$work/status-root.out")"
expect "as root on the read-only mount the monitor does not say the trigger was refused: $(jq -c .monitor "$work/status-root.out")" \
    grep -qi "read-only" <<<"$reported"
note "as root in the container: $reported"

# The service logs at notice level here (swift-log to standard error): the refused trigger is said
# once a PSI line (some, full), however long it runs, and it goes on.
make_bundle grow --memory 128M -- memwarn-growth-probe --rate 40 --total 384 --log-level notice
run_container grow
status=$?
lines="$(grep '^{' "$work/grow.out")"
expect "with memwarn the service in the container did not survive: exit $status; $(tail -3 "$work/grow.err")" test "$status" = 0
releases="$(jq -s '[.[] | select(.event=="release")] | length' <<<"$lines")"
refusals="$(grep -c 'PSI trigger refused' "$work/grow.err" || true)"
expect "the refused PSI trigger was said $refusals times, not once a PSI line (2): $(grep -m4 'PSI' "$work/grow.err")" test "$refusals" = 2
note "with memwarn, 40 MiB/s to 384 MiB under 128 MiB in the container: survived (exit 0), $releases releases; its log said the refused trigger $refusals times (some, full) in $(jq -s 'map(select(.event=="done"))[0].seconds // 0 | . * 10 | round / 10' <<<"$lines") s: $(grep -m1 'PSI trigger refused' "$work/grow.err" | cut -c1-250)"

make_bundle grow-unreleased --memory 128M -- memwarn-growth-probe --rate 40 --total 384 --releaser none
run_container grow-unreleased
status=$?
expect "without memwarn's releases the container was not OOM-killed: exit $status" test "$status" = 137
note "counterfactual, without memwarn's releases: exit $status (OOM-killed)"

make_bundle unlimited -- memwarn status --json
run_container unlimited || fail "memwarn status in a container without a limit failed: $(cat "$work/unlimited.err")"
status="$(cat "$work/unlimited.out")"
expect "without a limit memwarn does not measure the host's memory: $status" test "$(jq -r .measure <<<"$status")" = system
note "a container with no limit: measure $(jq -r .measure <<<"$status"), against $(mib "$(jq -r '.systemTotalBytes // 0' <<<"$status")") MiB of the host's memory; notes $(jq -c .notes <<<"$status" | cut -c1-300)"
