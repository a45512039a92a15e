# A Kubernetes-shaped tree, as the kubelet's systemd cgroup driver makes it: kubepods.slice with the
# node's allocatable memory as its limit (the kubelet sets memory.max there; 256 MiB here), the
# QoS slice kubepods-burstable.slice, a slice per pod with the pod's limit (240 MiB) and a scope per
# container with its own (230 MiB), made by crun's systemd cgroup manager from the cgroupsPath
# "kubepods-burstable-pod<uid>.slice:cri-containerd:<id>" as containerd passes it. Each container
# runs memwarn-growth-probe (the README's service) as pid 1 in its own namespaces (cgroupfs
# read-only), as pod.yaml's uid (65532), with XDG_RUNTIME_DIR on the host's /run/memwarn/pods/<uid>
# as pod.yaml mounts it (root's, 0755, as the kubelet makes it; its memwarn directory made for the
# service by pod.yaml's init container, run from the manifest's settings: pod.json): 150 MiB at
# 60 MiB/s (large), 90 at 30 (medium), 45 at 12 (small), whose sum passes the node's limit, each
# then holding its cache 30 s (at 20 % of a CPU, beside a hog, the inserts take far longer than the
# rates say, and a pod that ended early would leave the others room: the counterfactual needs all
# three at once). No
# other user of the node can make a pod's directory or its memwarn before the pod does (asserted).
# Each pod is CPU-limited to 20 % of a CPU (CPUQuota=20%: cpu.max 20000 100000, as a Kubernetes CPU
# limit of 200m sets it), and Scripts/system-vm-test runs a CPU hog on the host beside the VM while
# this scenario runs: the pods start slowly and answer slowly, as on a busy node.
# The agent runs as Examples/kubernetes/agent-daemonset.yaml says, read from the
# manifest (agent-daemonset.json): its command and arguments, hostPID (no pid namespace), uid 0
# with no capability but those it adds, a read-only root, the host's cgroup tree and endpoint
# directories bind-mounted read-only where the manifest mounts them, in its own cgroup namespace.
#   1. With the agent: no OOM kill below kubepods.slice, all three exit 0; the agent found the
#      three (from its private cgroup namespace, through the read-only host mount) before the
#      node's crossing, its first ask goes to the largest by the kernel's count, every round asks
#      in the kernel's order, the parent is relieved (how far down a round goes, and which pod is
#      the largest at the crossing, are the machine's pace).
#   2. Counterfactual: no agent. Each container's monitor sees its own limit only (its cgroup
#      namespace hides the node's): the kernel kills below kubepods.slice.
recipe="$examples/container/make-bundle"
settings="$(cat "$examples/kubernetes/agent-daemonset.json")" || fail "the DaemonSet's settings are missing"
pod="$(cat "$examples/kubernetes/pod.json")" || fail "the pod's settings are missing"
pods="$(jq -r .hostPath <<<"$pod")"
work=/var/lib/memwarn-system/pods
rm -rf "$work"
mkdir -p "$work"
cleanup() {
    for name in agent pod-large pod-medium pod-small; do
        crun --systemd-cgroup kill "$name" KILL 2>/dev/null
        crun --systemd-cgroup delete -f "$name" 2>/dev/null
    done
    rm -rf "$work"
    rmdir "$(jq -r .init.mountPath <<<"$pod")" 2>/dev/null
}
trap cleanup EXIT
# What this scenario models: a container that is not privileged and drops every capability but
# those it adds. A manifest that asked for more would not be what runs here: say so, not pass.
expect "the DaemonSet runs privileged: the scenario models an unprivileged agent" test "$(jq -r .privileged <<<"$settings")" = false
expect "the DaemonSet does not drop ALL capabilities: the scenario gives the agent only those it adds" test "$(jq -r .dropsAll <<<"$settings")" = true
expect "pod.yaml's init container does not drop ALL capabilities: the scenario gives it only those it adds" test "$(jq -r .init.dropsAll <<<"$pod")" = true
node=/sys/fs/cgroup/kubepods.slice
printf '[Unit]\nDescription=kubelet: pods (node allocatable)\n[Slice]\nMemoryMax=256M\n' >/etc/systemd/system/kubepods.slice
printf '[Unit]\nDescription=kubelet: burstable pods\n' >/etc/systemd/system/kubepods-burstable.slice
declare -A rate=([large]=60 [medium]=30 [small]=12) total=([large]=150 [medium]=90 [small]=45) uid=()
for name in large medium small agent; do
    uid[$name]="$(cat /proc/sys/kernel/random/uuid | tr - _)"
    printf '[Unit]\nDescription=kubelet: pod %s\n[Slice]\nMemoryMax=%s\n%s' "$name" "$([ "$name" = agent ] && echo 64M || echo 240M)" \
        "$([ "$name" = agent ] || printf 'CPUQuota=20%%\n')" \
        >"/etc/systemd/system/kubepods-burstable-pod${uid[$name]}.slice"
done
systemctl daemon-reload
# The node's endpoint directories as pod.yaml's DirectoryOrCreate makes them: root's, 0755 (never
# 1777: then any user of the node could make a pod's directory, or its memwarn, before the pod).
install -d -m 0755 "$pods"
# What another user of the node tries, as uid 65534: it must fail.
as_another_user_fails() { ! setpriv --reuid 65534 --regid 65534 --clear-groups "$@" 2>/dev/null; }
expect "uid 65534 could make a pod's directory in $pods ($(stat -c '%U %a' "$pods"))" as_another_user_fails mkdir "$pods/taken-$$"

# pod.yaml's init container as the kubelet runs it: its command, as its uid, with no capability
# but those it adds and no new privileges, the pod's directory bind-mounted where it mounts it.
run_init() {  # the pod's directory
    local command=() capabilities
    mapfile -t command < <(jq -r '.init.command[]' <<<"$pod")
    capabilities="-all$(jq -r '.init.capabilities | map(",+" + .) | join("")' <<<"$pod")"
    unshare --mount --propagation private -- sh -c 'mkdir -p "$1" && mount --bind "$2" "$1" && shift 2 && exec "$@"' init \
        "$(jq -r .init.mountPath <<<"$pod")" "$1" \
        setpriv --reuid "$(jq -r .init.runAsUser <<<"$pod")" --regid 0 --clear-groups --inh-caps -all --bounding-set "$capabilities" \
        --no-new-privs -- "${command[@]}" || fail "pod.yaml's init container failed on $1"
}

# A pod's container: its endpoint directory made as the kubelet and pod.yaml's init container make
# it, then a bundle by the recipe, the directory mounted as pod.yaml mounts it.
make_pod() {  # name
    local name=$1 bundle="$work/$1" directory="$pods/${uid[$1]}" user mount
    user="$(jq -r .serviceUser <<<"$pod")"
    mount="$(jq -r .mountPath <<<"$pod")"
    # The kubelet makes a subPathExpr directory root's, with its volume's mode (its subpath SafeMakeDir).
    install -d -m "$(stat -c %a "$pods")" "$directory"
    expect "uid 65534 could make $directory/memwarn before the pod did" as_another_user_fails mkdir "$directory/memwarn"
    run_init "$directory"
    expect "the init container did not make $directory/memwarn the service's, 0700: $(stat -c '%u %a' "$directory/memwarn" 2>&1)" \
        test "$(stat -c '%u %a' "$directory/memwarn" 2>/dev/null)" = "$user 700"
    "$recipe" --user "$user:$(jq -r .serviceGroup <<<"$pod")" --memory 230M --runtime crun "$bundle" /usr/local/bin/memwarn-growth-probe -- \
        --rate "${rate[$name]}" --total "${total[$name]}" --control default --start-after 1 --hold 30 >/dev/null ||
        fail "make-bundle for pod $name failed"
    mkdir -p "$bundle/rootfs$mount"
    jq --arg path "kubepods-burstable-pod${uid[$name]}.slice:cri-containerd:$name" \
        --arg source "$directory" --arg mount "$mount" --arg runtime "$(jq -r .xdgRuntimeDir <<<"$pod")" '
        .linux.cgroupsPath = $path
        | .process.env += ["XDG_RUNTIME_DIR=" + $runtime]
        | .mounts += [{destination: $mount, type: "bind", source: $source, options: ["rbind", "rw"]}]' \
        "$bundle/config.json" >"$bundle/config.new" && mv "$bundle/config.new" "$bundle/config.json"
}

# The agent's container, from the DaemonSet's settings.
make_agent() {
    local bundle="$work/agent" user
    user="$(jq -r '"\(.runAsUser):\(.runAsGroup)"' <<<"$settings")"
    "$recipe" --user "$user" --runtime crun "$bundle" /usr/local/bin/memwarn -- agent >/dev/null || fail "make-bundle for the agent failed"
    mkdir -p "$bundle/rootfs/usr/local/bin"
    cp /usr/local/bin/memwarn "$bundle/rootfs/usr/local/bin/memwarn"
    local mounts='[]'
    while read -r mount; do
        local path source
        path="$(jq -r .path <<<"$mount")"
        mkdir -p "$bundle/rootfs$path"
        if source="$(jq -er .hostPath <<<"$mount")"; then
            mounts="$(jq --arg path "$path" --arg source "$source" --argjson ro "$(jq .readOnly <<<"$mount")" \
                '. + [{destination: $path, type: "bind", source: $source, options: (["rbind"] + (if $ro then ["ro"] else ["rw"] end))}]' <<<"$mounts")"
        else
            mounts="$(jq --arg path "$path" '. + [{destination: $path, type: "tmpfs", source: "tmpfs", options: ["nosuid", "nodev", "size=1m"]}]' <<<"$mounts")"
        fi
    done < <(jq -c '.mounts[]' <<<"$settings")
    jq --argjson settings "$settings" --argjson mounts "$mounts" --arg path "kubepods-burstable-pod${uid[agent]}.slice:cri-containerd:agent" '
        .process.args = $settings.command
        | .process.noNewPrivileges = $settings.noNewPrivileges
        | .root.readonly = $settings.readOnlyRootFilesystem
        | .process.capabilities = {bounding: $settings.capabilities, effective: $settings.capabilities, permitted: $settings.capabilities}
        | .linux.namespaces |= (if $settings.hostPID then map(select(.type != "pid")) else . end)
        | .mounts += $mounts
        | .linux.cgroupsPath = $path' "$bundle/config.json" >"$bundle/config.new" && mv "$bundle/config.new" "$bundle/config.json"
}

# Runs the three pods at once to their end; prints the node's new OOM kills, then each pod's exit.
run_pods() {
    local before pids=() name
    before="$(memory_event "$node" oom_kill)"
    # Every bundle first (make-bundle takes seconds under emulation), then the three at once.
    for name in large medium small; do
        rm -rf "$work/$name" "${pods:?}/${uid[$name]}"
        make_pod "$name"
    done
    for name in large medium small; do
        timeout 150 crun --systemd-cgroup run --bundle "$work/$name" "pod-$name" >"$work/$name.out" 2>"$work/$name.err" </dev/null &
        pids+=($!)
    done
    local statuses="" names=(large medium small) status
    for index in 0 1 2; do
        wait "${pids[$index]}"
        status=$?
        statuses+="${names[$index]}=$status "
    done
    echo "$(($(memory_event "$node" oom_kill) - before)) $statuses"
}

make_agent
note "the agent's container, from the DaemonSet: $(jq -c '{args: .process.args[1:], user: .process.user, caps: .process.capabilities.effective, namespaces: [.linux.namespaces[].type], readonlyRoot: .root.readonly, mounts: [.mounts[] | select(.destination | test("^/host|^/var/lib/memwarn")) | "\(.source) -> \(.destination) \(.options | map(select(. == "ro" or . == "rw")) | join(""))"]}' "$work/agent/config.json")"
crun --systemd-cgroup run --bundle "$work/agent" agent >"$work/agent.out" 2>"$work/agent.err" </dev/null &
agent=$!
grep -q -m1 '"event":"started"' < <(timeout 30 tail -n +1 -f "$work/agent.out") ||
    fail "the agent in its container did not start: $(tail -5 "$work/agent.err") $(tail -3 "$work/agent.out")"
note "the agent in its container: $(head -1 "$work/agent.out" | cut -c1-300)"
note "the tree: kubepods.slice memory.max $(cat "$node/memory.max"), kubepods-burstable.slice $(cat "$node/kubepods-burstable.slice/memory.max" 2>&1)"
run_pods >"$work/pods.run"
read -r kills statuses <"$work/pods.run"
crun kill agent TERM 2>/dev/null
wait "$agent"
records="$(grep '^{' "$work/agent.out")"
expect "with the agent: OOM kills $kills below kubepods.slice, pods $statuses; the agent said (renewals left out):
$(grep -v '"event":"renewed"' <<<"$records" | head -60 | cut -c1-400)
$(tail -3 "$work/agent.err")" test "$kills" = 0
expect "with the agent a pod did not exit 0: $statuses" test "$statuses" = "large=0 medium=0 small=0"
found="$(jq -s '[.[] | select(.event=="found")] | length' <<<"$records")"
first="$(jq -rs '[.[] | select(.event=="round")][0].order[0].cgroup // "none"' <<<"$records")"
asked="$(jq -rs '[.[] | select(.event=="ask") | .cgroup | capture("cri-containerd-(?<id>[a-z]+)") | .id] | join(", ")' <<<"$records")"
expect "the agent found $found pods' services, not 3: $(grep -m3 -E 'found|unreadable|unreachable|refused' <<<"$records")" test "$found" = 3
firstAsk="$(jq -rs '[.[] | select(.event=="ask" or .event=="unanswered")][0].cgroup // "none"' <<<"$records")"
# The largest by the kernel's count leads (every round in that order: agent_order_breaches below);
# at 20 % of a CPU each, which pod that is at the crossing is the machine's pace, not its rate.
expect "the first ask went to $firstAsk, not the first round's largest, $first" test "$firstAsk" = "$first"
late="$(jq -rs '(([.[] | select(.event=="crossing")][0].time) // "") as $crossing | [.[] | select(.event=="found" and $crossing != "" and .time > $crossing)] | length' <<<"$records")"
expect "$late pods were found after the node's crossing: $(grep -E '"event":"(found|crossing)"' <<<"$records" | cut -c1-200)" test "$late" = 0
watching="$(jq -rs '[.[] | select(.event=="watching")][0].reason // "none"' <<<"$records")"
expect "the agent is not woken by the parent's memory.events (cgroup v2): $watching" grep -q "inotify [^;]*kubepods.slice/memory.events" <<<"$watching"
breaches="$(agent_order_breaches <<<"$records")"
expect "the agent asked out of the kernel's order: $breaches" test -z "$breaches"
expect "the agent never relieved the parent: $(tail -5 <<<"$records")" grep -q '"event":"relieved"' <<<"$records"
expect "the agent never asked" test -n "$asked"
note "with the agent as the DaemonSet runs it (pods at 20 % of a CPU, a CPU hog beside the VM): pods $statuses; OOM kills below kubepods.slice 0; found 3 through its read-only host mount before the crossing, first round led by the largest then, $(grep -o 'cri-containerd-[a-z]*' <<<"$first"), asked: $asked; leases: $(jq -rs '[.[] | select(.event | test("lease"))] | map(.event) | group_by(.) | map("\(.[0]) \(length)") | join(", ")' <<<"$records")"
note "the agent's timeline: $(jq -rs '[.[] | select(.event | test("^(found|crossing|round|ask|unanswered|relieved|unrelievable)$")) | "\(.time[11:23]) \(.event)\(if .cgroup then " " + (.cgroup | capture("cri-containerd-(?<id>[a-z]+)").id // "") else "" end)\(if .milliseconds then " \(.milliseconds | floor) ms" else "" end)"] | join("; ")' <<<"$records" | cut -c1-1500)"
note "the agent's peak memory in its pod: $(mib "$(cat "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${uid[agent]}.slice/memory.peak" 2>/dev/null || echo 0)") MiB of its 64 MiB"

run_pods >"$work/pods.run"
read -r kills statuses <"$work/pods.run"
expect "without the agent nobody was OOM-killed: pods $statuses, OOM kills $kills" test "$kills" -gt 0 -a "$statuses" != "large=0 medium=0 small=0"
note "counterfactual, no agent (each container sees only its own limit): pods $statuses; OOM kills below kubepods.slice $kills"
