# Beside systemd-oomd, the anchor that kills: a slice with ManagedOOMMemoryPressure=kill and a
# pressure limit, oomd's pressure duration shortened to this VM's scale (DefaultMemoryPressureDurationSec=2s,
# the default is 30 s), and in it my-service.service as shipped (as guarded-service), MemoryMax=160M and
# MemoryHigh=144M (90 %): above memory.high the kernel throttles the service (memory pressure).
#   1. Without memwarn's releases (--releaser none) the service grows into memory.high, stalls,
#      and is killed: by systemd-oomd at the slice's pressure limit, or by the kernel at MemoryMax.
#   2. With memwarn (the default), the same load: it releases at its warning mark (80 % of the
#      effective limit, memory.high here), is not throttled (under 1 s of full memory stall in
#      the slice), and nothing kills it.
# The service's executable is read from an ext4 file system on a RAM disk (brd), as a real service's
# is from a disk: its text pages are file-backed, so the kernel's reclaim at memory.high has
# something to scan and drop (and fault back in): the reclaim systemd-oomd waits for before it
# kills (the VM's root is a tmpfs, and without swap anonymous memory is never scanned).
# The slice's memory PSI is reported both ways. systemd 252 has no MemoryPressureWatch= (254+):
# memwarn's own sources (memory.events, usage sampling, its PSI trigger on the unit's cgroup) are
# what warn here; the 254+ environment path is tested by SystemdContractTests on every run.
slice_name=guarded.slice
# Clean-up, whatever happens: what this scenario set must not reach the next ones.
cleanup() {
    systemctl stop guarded-service.service "$slice_name" 2>/dev/null
    umount /srv/disk 2>/dev/null
    rmmod brd 2>/dev/null
    rm -rf /etc/systemd/oomd.conf.d
    systemctl restart systemd-oomd.service 2>/dev/null
}
trap cleanup EXIT
slice=/sys/fs/cgroup/$slice_name
unit=guarded-service.service
mkdir -p /etc/systemd/oomd.conf.d
printf '[OOM]\nDefaultMemoryPressureDurationSec=2s\n' >/etc/systemd/oomd.conf.d/system-vm.conf
cat >/etc/systemd/system/$slice_name <<'UNIT'
[Unit]
Description=A slice systemd-oomd guards by memory pressure

[Slice]
ManagedOOMMemoryPressure=kill
ManagedOOMMemoryPressureLimit=20%
UNIT
insmod /usr/local/lib/memwarn-system/modules/brd.ko rd_nr=1 rd_size=131072 2>/dev/null || test -b /dev/ram0 ||
    fail "the RAM disk (brd) could not be made"
mkfs.ext4 -q -F /dev/ram0 || fail "mkfs.ext4 /dev/ram0 failed"
mkdir -p /srv/disk
mountpoint -q /srv/disk || mount /dev/ram0 /srv/disk || fail "mount /dev/ram0 failed"
cp /usr/local/bin/memwarn-growth-probe /srv/disk/
# The copy's pages in the page cache are charged to this script's cgroup: dropped, the service
# faults its executable in itself, into its own cgroup.
sync
echo 1 >/proc/sys/vm/drop_caches
install_service_copy guarded-service "[Service]
Slice=$slice_name
MemoryMax=160M
MemoryHigh=144M
Restart=no" /srv/disk/memwarn-growth-probe
systemctl daemon-reload
note "$unit: $(systemctl show -p Slice -p MemoryMax -p MemoryHigh "$unit" | tr '\n' ' ')"
systemctl restart systemd-oomd.service
# Its decisions, in the journal: why it kills, or why not.
systemctl service-log-level systemd-oomd.service debug 2>/dev/null
expect "systemd-oomd is not running: $(systemctl status systemd-oomd --no-pager 2>&1 | tail -5)" systemctl is-active --quiet systemd-oomd.service
systemctl start "$slice_name"

# The slice's memory stall so far, "full" (every task in it stalled), in milliseconds.
full_stall_ms() { sed -n 's/^full .*total=\([0-9]*\)$/\1/p' "$slice/memory.pressure" | awk '{ print int($1 / 1000) }'; }

# Runs the service once with the given probe arguments, for at most 90 s; prints "result
# oomd-kills kernel-kills stall-ms seconds" (result "stalled" when it had not ended by then; the
# slice's full memory stall during the run, and how long it ran).
run_guarded() {
    probe_arguments guarded-service "$@"
    local mark kills_before
    mark="$(journal_mark)"
    kills_before="$(memory_event "$slice" oom_kill)"
    local stall_before started=$SECONDS
    stall_before="$(full_stall_ms)"
    local result=""
    timeout 90 systemctl start --wait "$unit" >/dev/null 2>&1
    [ $? -eq 124 ] && result=stalled
    local stall_after seconds=$((SECONDS - started))
    stall_after="$(full_stall_ms)"
    if [ "$result" = stalled ]; then
        systemctl kill -s KILL "$unit" 2>/dev/null
        timeout 30 systemctl stop "$unit" >/dev/null 2>&1
    fi
    journalctl --sync
    local oomd_kills
    oomd_kills="$(journalctl -o cat --no-pager -u systemd-oomd.service --cursor="$mark" | grep -o 'Killed /[^ ]* due to memory pressure' | sort -u | grep -c . || true)"
    echo "${result:-$(unit_result "$unit")} $oomd_kills $(($(memory_event "$slice" oom_kill) - kills_before)) $((stall_after - stall_before)) $seconds"
}

run_guarded --rate 20 --total 400 --releaser none >/run/memwarn-system-oomd.run
read -r result oomd_kills kernel_kills stall seconds </run/memwarn-system-oomd.run
pressure_without="$(pressure_line "$slice" full)"
expect "without memwarn's releases nothing killed the service: Result=$result, oomd kills $oomd_kills, kernel kills $kernel_kills" \
    test "$oomd_kills" -gt 0 -o "$kernel_kills" -gt 0
note "without memwarn's releases (20 MiB/s to 400 MiB): Result=$result after $seconds s; killed by systemd-oomd $oomd_kills times, by the kernel $kernel_kills times; the slice's full memory stall $stall ms; its PSI then: $pressure_without"
if [ "$oomd_kills" -gt 0 ]; then
    note "systemd-oomd: $(journalctl -o cat --no-pager -u systemd-oomd.service | grep -m1 'Killed ')"
else
    note "systemd-oomd did not act; what it said of the slice: $(journalctl -o cat --no-pager -u systemd-oomd.service | grep -i 'guarded' | tail -3 | tr '\n' '|' | cut -c1-600)"
fi
note "the service's reclaim: $(grep -E '^(pgscan|pgsteal|workingset_refault_file) ' "$slice/memory.stat" | tr '\n' ' ')"

# The slice's full-stall average (what oomd reads) decays after the kill, with no event to wait
# for: run again once it is under oomd's limit, or oomd would count the last run's pressure.
for _ in $(seq 60); do
    avg10="$(sed -n 's/^full avg10=\([0-9]*\).*/\1/p' "$slice/memory.pressure")"
    [ "${avg10:-100}" -lt 20 ] && break
    sleep 1
done
run_guarded --rate 20 --total 400 --control default >/run/memwarn-system-oomd.run
read -r result oomd_kills kernel_kills stall seconds </run/memwarn-system-oomd.run
pressure_with="$(pressure_line "$slice" full)"
expect "with memwarn the service did not survive: Result=$result, oomd kills $oomd_kills, kernel kills $kernel_kills" \
    test "$result" = success -a "$oomd_kills" = 0 -a "$kernel_kills" = 0
# No stall: under a second of full memory stall in the slice (measured: 0 ms).
expect "with memwarn the slice still stalled for $stall ms" test "$stall" -lt 1000
note "with memwarn, the same load: Result=$result after $seconds s, no kill; the slice's full memory stall $stall ms; its PSI then: $pressure_with"

