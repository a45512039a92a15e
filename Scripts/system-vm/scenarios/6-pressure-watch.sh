# systemd's MemoryPressureWatch= (systemd 254 and later; Debian 13's 257): systemd hands a service
# its cgroup's memory.pressure in MEMORY_PRESSURE_WATCH and a PSI trigger in MEMORY_PRESSURE_WRITE
# (base64), and memwarn's monitor watches them. Examples/systemd/my-service.service as shipped
# (MemoryPressureWatch=on, MemoryPressureThresholdSec=200ms), a drop-in with MemoryMax=128M and
# MemoryHigh=115M, and memwarn-growth-probe as its executable (the README's service).
#   1. on: the environment names the unit's memory.pressure and "some 200000 2000000"; the
#      service's monitor watches it (`memwarn status --pid`: "systemd PATH" among its sources);
#      MemoryPressureThresholdSec=100ms writes "some 100000 2000000"; auto is on (the unit's memory
#      is accounted); off sets /dev/null and the monitor watches no systemd source.
#   2. The same growth rates as the systemd-service scenario (40, 100, 160 MiB/s to three times the
#      limit), survived with the watch on.
#   3. The events it gets: the watch covers the whole unit. A helper of the service in a cgroup of
#      its own under the unit (Delegate=yes), throttled at its memory.high, stalls the unit while
#      the unit's usage stays far below memwarn's marks and the service itself does not stall:
#      only systemd's watch sees it, and the service warns from it (source
#      systemd-memory-pressure). Counterfactual, asserted: with MemoryPressureWatch=off the same
#      stall (the unit's memory.pressure grows) brings no warning.
#   4. A watch it cannot open (Environment=MEMORY_PRESSURE_WATCH= naming a missing file, which
#      overrides systemd's): the service still arms, `memwarn status --pid` says why the watch is
#      not watched, and its log says it once.
#   5. As an ordinary user (User=nobody): systemd hands the user the unit's memory.pressure, and
#      the kernel takes a trigger without CAP_SYS_RESOURCE whose window is 2 s (the
#      systemd-service scenario reports what Debian 12 does): the service's monitor writes
#      systemd's trigger and its own.
unit=my-service.service
cleanup() {
    systemctl stop "$unit" pressure-helper.service 2>/dev/null
    rm -rf "/etc/systemd/system/$unit.d/zz-watch.conf" /etc/systemd/system/pressure-helper.service*
    systemctl daemon-reload
}
trap cleanup EXIT
version="$(systemctl --version | sed -n 's/^systemd \([0-9]*\).*/\1/p')"
expect "systemd $version has no MemoryPressureWatch= (254 and later)" test "${version:-0}" -ge 254
install_probe_executable my-service
install_example_unit "$unit" "[Service]
MemoryMax=128M
MemoryHigh=115M"
systemctl daemon-reload
cgroup=/sys/fs/cgroup/system.slice/my-service.service

# A drop-in that sorts after system-vm.conf (its settings override), or none.
watch_settings() {
    if [ $# -eq 0 ]; then rm -f "/etc/systemd/system/$unit.d/zz-watch.conf"; else printf '[Service]\n%s\n' "$@" >"/etc/systemd/system/$unit.d/zz-watch.conf"; fi
    systemctl daemon-reload
}
# Starts the service holding a little memory with its control endpoint up; sets pid and mark.
start_holding() {  # probe arguments…
    probe_arguments my-service --rate 20 --total 20 --hold 120 --control default "$@"
    mark="$(journal_mark)"
    systemctl start "$unit"
    expect "the service's control endpoint did not come up" wait_for_line "$unit" "$mark" '"event":"control"' 30 >/dev/null
    pid="$(systemctl show -p MainPID --value "$unit")"
}
# The variable NAME of the service's environment as systemd set it.
service_variable() { tr '\0' '\n' <"/proc/$pid/environ" | sed -n "s/^$1=//p"; }
# What the service's own monitor listens to, as its control endpoint says (the unit puts the
# endpoint in its runtime directory: memwarn status looks there with the same XDG_RUNTIME_DIR),
# asked as the service's user (an endpoint is believed from this user or root only).
service_sources() {
    runuser -u "$(stat -c %U "/proc/$pid")" -- env XDG_RUNTIME_DIR=/run/my-service \
        memwarn status --pid "$pid" --json --growth-sample 0s | jq -r '.processMonitorSources // [] | .[]'
}

# With a drop-in's settings (none: as shipped), the service started: the watch systemd names must
# be the unit's memory.pressure, its trigger the one expected, and the service's monitor must
# watch it. Sets watch, trigger and sources.
expect_watched() {  # expected-trigger [setting…]
    local expected=$1 settings="${*:2}"
    shift
    watch_settings "$@"
    start_holding
    watch="$(service_variable MEMORY_PRESSURE_WATCH)"
    trigger="$(service_variable MEMORY_PRESSURE_WRITE | base64 -d | tr -d '\0')"
    sources="$(service_sources)"
    expect "${settings:-as shipped}: MEMORY_PRESSURE_WATCH is '$watch', not the unit's memory.pressure" test "$watch" = "$cgroup/memory.pressure"
    expect "${settings:-as shipped}: the trigger systemd asks for is '$trigger', not '$expected'" test "$trigger" = "$expected"
    expect "${settings:-as shipped}: the service's monitor does not watch systemd's $watch: $sources" grep -qx "systemd $watch" <<<"$sources"
    systemctl stop "$unit"
}

# 1. on as shipped, the threshold, auto and off.
expect_watched "some 200000 2000000"
note "on (as shipped): MEMORY_PRESSURE_WATCH=$watch, MEMORY_PRESSURE_WRITE '$trigger'; memwarn status --pid: its monitor watches $(grep -c . <<<"$sources") sources: $(paste -sd'|' <<<"$sources" | cut -c1-500)"
expect_watched "some 100000 2000000" MemoryPressureThresholdSec=100ms
expect_watched "some 200000 2000000" MemoryPressureWatch=auto
watch_settings MemoryPressureWatch=off
start_holding
watch="$(service_variable MEMORY_PRESSURE_WATCH)"
sources="$(service_sources)"
expect "MemoryPressureWatch=off: MEMORY_PRESSURE_WATCH is '$watch', not /dev/null" test "$watch" = /dev/null
expect "off: the service's monitor still watches a systemd source: $sources" test -z "$(grep '^systemd' <<<"$sources")"
expect "off: the service's monitor has no PSI trigger of its own on the unit: $sources" grep -q "^psi-trigger some .* on $cgroup/memory.pressure" <<<"$sources"
note "auto: the same watch as on; off: MEMORY_PRESSURE_WATCH=/dev/null, no systemd source, its own PSI triggers: $(grep '^psi-trigger' <<<"$sources" | paste -sd'|')"
systemctl stop "$unit"
watch_settings

# 2. Growth with the watch on, at the systemd-service scenario's rates.
slice=/sys/fs/cgroup/system.slice
for rate in 40 100 160; do
    probe_arguments my-service --rate "$rate" --total 384 --control default
    run_and_read_unit "$unit" "$slice"
    expect "at $rate MiB/s with the watch on the service did not survive: Result=$result, OOM kills $kills; $(tail -3 <<<"$lines")" test "$result" = success -a "$kills" = 0
    releases="$(jq -s '[.[] | select(.event=="release")] | length' <<<"$lines")"
    sources="$(jq -rs '[.[] | select(.event=="level" and .level != "normal") | .source] | group_by(.) | map("\(.[0]) \(length)") | join(", ")' <<<"$lines")"
    note "with the watch on, $rate MiB/s to 384 MiB under 128 MiB: survived, $releases releases; warnings by source: $sources"
done

# 3. The events: a helper stalled in a cgroup of its own under the unit. The service's executable
# for this part moves itself into <unit>/service, enables the memory controller for the unit's
# children, starts the helper in <unit>/helper (memory.high 8M, growing at 4 MiB/s without
# releases: throttled once past it) and execs the service there (5 MiB). The unit's usage stays
# near 20 MiB of 115, and grows too slowly for a forecast.
cat >/usr/local/bin/my-service-with-helper <<'WRAPPER'
#!/bin/bash
unit="/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)"
mkdir -p "$unit/service" "$unit/helper"
echo $$ >"$unit/service/cgroup.procs"
echo +memory >"$unit/cgroup.subtree_control"
echo 8M >"$unit/helper/memory.high"
(echo "$BASHPID" >"$unit/helper/cgroup.procs" && exec /usr/local/bin/memwarn-growth-probe --releaser none --rate 4 --total 40 --hold 60 >/dev/null) &
exec /usr/local/bin/memwarn-growth-probe --rate 5 --total 5 --hold 120 --control default
WRAPPER
chmod 0755 /usr/local/bin/my-service-with-helper
helper_run() {  # MemoryPressureWatch value; sets lines, stall (ms of the unit's some stall)
    watch_settings "MemoryPressureWatch=$1" Delegate=yes ExecStart= ExecStart=/usr/local/bin/my-service-with-helper
    mark="$(journal_mark)"
    systemctl start "$unit"
    expect "the service under the helper did not come up" wait_for_line "$unit" "$mark" '"event":"control"' 30 >/dev/null
    local before
    before="$(sed -n 's/^some .*total=\([0-9]*\)$/\1/p' "$cgroup/memory.pressure")"
    warning="$(wait_for_line "$unit" "$mark" '"event":"level".*"level":"(warning|critical)"' 12)"
    stall=$((($(sed -n 's/^some .*total=\([0-9]*\)$/\1/p' "$cgroup/memory.pressure") - before) / 1000))
    usage="$(cat "$cgroup/memory.current")"
    own="$(sed -n 's/^some .*total=\([0-9]*\)$/\1/p' "$cgroup/service/memory.pressure")"
    systemctl stop "$unit"
}
helper_run on
expect "with the watch on, the helper's stall (the unit's some stall grew by $stall ms) brought no warning within 12 s" test -n "$warning"
expect "the warning did not come from systemd's watch: $warning" grep -q '"source":"systemd-memory-pressure"' <<<"$warning"
note "on: a helper throttled in <unit>/helper stalled the unit ($stall ms of some stall; the service's own cgroup $((own / 1000)) ms; the unit at $(mib "$usage") MiB of 115): the service warned from systemd's watch: $(jq -c '{level, source, usage}' <<<"$warning")"
helper_run off
expect "with the watch off the unit did not stall ($stall ms): the counterfactual shows nothing" test "$stall" -gt 200
expect "with the watch off the service warned all the same: $warning" test -z "$warning"
note "off (counterfactual): the same stall ($stall ms of some stall in 12 s, the unit at $(mib "$usage") MiB) brought no warning: the service's own sources watch its own cgroup"
watch_settings
rm -f /usr/local/bin/my-service-with-helper

# 4. A watch it cannot open.
watch_settings Environment=MEMORY_PRESSURE_WATCH=/run/no-such-pressure-watch
start_holding --log-level warning
sources="$(service_sources)"
said="$(grep '^systemd /run/no-such-pressure-watch not watched' <<<"$sources")"
expect "a watch that cannot be opened: the service's monitor does not say why: $sources" grep -q "does not exist" <<<"$said"
logged="$(journalctl --sync; journalctl -o cat --no-pager -u "$unit" --cursor="$mark" | grep -c 'pressure watch systemd named cannot be used' || true)"
expect "its log said the unusable watch $logged times, not once" test "$logged" = 1
note "a watch it cannot open: the service armed; memwarn status --pid: '$said'; logged once"
systemctl stop "$unit"
watch_settings

# 5. As an ordinary user.
watch_settings User=nobody
start_holding
sources="$(service_sources)"
expect "as User=nobody the service's monitor does not watch systemd's watch: $sources" grep -qx "systemd $cgroup/memory.pressure" <<<"$sources"
expect "as User=nobody on kernel $(uname -r) the monitor's own PSI trigger was refused: $sources" grep -q "^psi-trigger some .* on $cgroup/memory.pressure" <<<"$sources"
note "as User=nobody (memory.pressure $(stat -c '%U %a' "$cgroup/memory.pressure"), kernel $(uname -r)): the service's monitor writes systemd's trigger and its own: $(grep -E '^(systemd|psi)' <<<"$sources" | paste -sd'|')"
systemctl stop "$unit"
watch_settings
