# A shared slice with the agent as shipped: Examples/systemd's shared.slice (with a drop-in for
# this VM's size, MemoryMax=256M) and memwarn-agent@.service unchanged, and three services in the
# slice made from my-service.service as its README says (Slice=shared.slice, their own
# RuntimeDirectory and XDG_RUNTIME_DIR, no limit of their own): memwarn-growth-probes inserting
# 150 MiB at 60 MiB/s (large), 90 at 30 (medium), 45 at 12 (small), whose sum does not fit.
#   1. With memwarn-agent@shared running: no OOM kill in the slice, all three succeed; the agent
#      found the three, every round is in the kernel's order (the largest as measured first) and
#      asks in it, and the parent is relieved (how far down a round goes is the machine's pace).
#      Which service leads the first round is said, not judged: the three start at once, and
#      under emulation the medium one was seen ahead when the first round came (the agent found
#      it 0.4 s before the large one), so it was rightly asked first.
#   2. Without the agent, the default monitors each count the slice's limit: reported.
#   3. Counterfactual: no agent, and each service sees only its own cgroup, as a container in a pod
#      does (MEMWARN_ANCESTOR_LIMITS=ignore): the kernel kills in the slice.
slice=/sys/fs/cgroup/shared.slice
cleanup() {
    systemctl stop memwarn-agent@shared.service shared-large.service shared-medium.service shared-small.service 2>/dev/null
    rm -f /etc/systemd/system/shared-*.service.d/zz-counterfactual.conf
    systemctl daemon-reload
}
trap cleanup EXIT
install_example_unit shared.slice "[Slice]
MemoryMax=256M"
install_example_unit memwarn-agent@.service
# The agent's metrics file goes to node_exporter's textfile folder, which a node with
# node_exporter has; this VM has none.
mkdir -p /var/lib/prometheus/node-exporter
declare -A rate=([large]=60 [medium]=30 [small]=12) total=([large]=150 [medium]=90 [small]=45)
services=()
for name in large medium small; do
    unit="shared-$name.service"
    services+=("$unit")
    install_service_copy "shared-$name" "[Service]
Slice=shared.slice
MemoryMax=infinity
MemoryHigh=infinity
Restart=no"
done
systemctl daemon-reload

# Starts the three services at once and waits for all of them to end; prints the slice's new OOM kills.
run_three() {  # extra probe arguments…
    for name in large medium small; do
        probe_arguments "shared-$name" --rate "${rate[$name]}" --total "${total[$name]}" --control default --start-after 1 --hold 2 "$@"
    done
    local before
    before="$(memory_event "$slice" oom_kill)"
    timeout 150 systemctl start --wait "${services[@]}" >/dev/null 2>&1
    [ $? -eq 124 ] && fail "the three services had not ended after 150 s: $(results)"
    echo $(($(memory_event "$slice" oom_kill) - before))
}
results() { for unit in "${services[@]}"; do echo -n "${unit%.service}=$(unit_result "$unit") "; done; }

agent=memwarn-agent@shared.service
mark="$(journal_mark)"
systemctl start "$agent"
expect "the agent did not start: $(systemctl status "$agent" --no-pager 2>&1 | tail -5)" \
    wait_for_line "$agent" "$mark" '"event":"started"' 30 >/dev/null
kills="$(run_three)"
outcome="$(results)"
records="$(unit_lines "$agent" "$mark")"
agent_cgroup="/sys/fs/cgroup$(systemctl show -p ControlGroup --value "$agent")"
agent_peak="$(cat "$agent_cgroup/memory.peak" 2>/dev/null || echo 0)"
sandbox="$(systemctl show -p NoNewPrivileges,CapabilityBoundingSet,ProtectSystem,ProtectControlGroups,RestrictAddressFamilies,PrivateNetwork "$agent" | tr '\n' ' ')"
exposure="$(systemd-analyze security "$agent" --no-pager 2>/dev/null | tail -1)"
systemctl stop "$agent"
expect "with the agent: OOM kills $kills, $outcome; agent: $(tail -5 <<<"$records")" test "$kills" = 0
for unit in "${services[@]}"; do expect "with the agent $unit did not succeed: $outcome" test "$(unit_result "$unit")" = success; done
found="$(jq -s '[.[] | select(.event=="found")] | length' <<<"$records")"
first="$(jq -rs '[.[] | select(.event=="round")][0].order[0].cgroup // "none"' <<<"$records")"
asked="$(jq -rs '[.[] | select(.event=="ask") | .cgroup | split("/") | last | sub("\\.service$"; "")] | join(", ")' <<<"$records")"
expect "the agent found $found services, not 3: $(head -5 <<<"$records")" test "$found" = 3
firstAsk="$(jq -rs '[.[] | select(.event=="ask" or .event=="unanswered")][0].cgroup // "none"' <<<"$records")"
expect "the first ask went to $firstAsk, not the first round's largest, $first" test "$firstAsk" = "$first"
watching="$(jq -rs '[.[] | select(.event=="watching")][0].reason // "none"' <<<"$records")"
expect "the agent is not woken by the parent's memory.events (cgroup v2): $watching" grep -q "inotify [^;]*shared.slice/memory.events" <<<"$watching"
expect "the agent's unit is not sandboxed as shipped: $sandbox" grep -q "NoNewPrivileges=yes" <<<"$sandbox"
expect "the agent's unit keeps more than CAP_DAC_OVERRIDE: $sandbox" grep -q "CapabilityBoundingSet=cap_dac_override " <<<"$sandbox"
expect "the agent used $(mib "$agent_peak") MiB, more than half its MemoryMax=64M" test "$agent_peak" -lt $((32 << 20))
breaches="$(agent_order_breaches <<<"$records")"
expect "the agent asked out of the kernel's order: $breaches" test -z "$breaches"
expect "the agent never relieved the parent: $(tail -5 <<<"$records")" grep -q '"event":"relieved"' <<<"$records"
expect "the agent never asked" test -n "$asked"
note "with memwarn-agent@shared: $outcome; slice OOM kills 0; the agent found 3, first round led by ${first##*/}, asked: $asked"
note "the agent's unit as shipped: $sandbox; peak $(mib "$agent_peak") MiB of its MemoryMax=64M; systemd-analyze security: ${exposure:-unavailable}"
note "slice with the agent: $(pressure_line "$slice" some); peak $(mib "$(cat "$slice/memory.peak" 2>/dev/null || echo 0)") MiB of 256"
metrics=/var/lib/prometheus/node-exporter/memwarn-agent-shared.prom
expect "the agent wrote no metrics file at $metrics" test -s "$metrics"

# Without the agent, each default monitor counts the slice's limit on its own: reported, not judged.
kills="$(run_three)"
note "no agent, default monitors (each counts the slice itself, all release at once): $(results); slice OOM kills $kills"

for name in large medium small; do
    printf '[Service]\nEnvironment=MEMWARN_ANCESTOR_LIMITS=ignore\n' >"/etc/systemd/system/shared-$name.service.d/zz-counterfactual.conf"
done
systemctl daemon-reload
kills="$(run_three)"
outcome="$(results)"
rm -f /etc/systemd/system/shared-*.service.d/zz-counterfactual.conf
systemctl daemon-reload
expect "without the agent, blind to the slice, nobody was OOM-killed: $outcome" test "$kills" -gt 0
note "counterfactual, no agent and each service blind to the slice (MEMWARN_ANCESTOR_LIMITS=ignore): $outcome; slice OOM kills $kills"
