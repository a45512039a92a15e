# Podman as its users start it (Debian 13's Podman 5 with crun): the image built by podman build
# from Examples/container/Containerfile.prebuilt (FROM scratch and the static executables: there
# is no registry here) and run with podman run --memory 128m, as root and rootless.
#   1. Rootful: inside, memwarn status reads the container's cgroup as / and 128 MiB from
#      memory.max, and its monitor arms; memwarn-growth-probe (the README's service) survives
#      growth to three times the limit; without memwarn's releases, exit 137.
#   2. Rootless, as an ordinary user (uid 1000, subordinate ids from useradd) whose user@.service
#      has the memory controller delegated (systemd's default): the same checks, with the limit a
#      cgroup under the user's own manager; the user's image store is the user's own, so the
#      image is built again as that user. What memwarn gets there (its sources) is printed.
work=/var/lib/memwarn-system/podman
user=memwarn-tester
cleanup() {
    podman rmi -f localhost/memwarn-probe >/dev/null 2>&1
    [ -n "${uid:-}" ] && as_user podman rmi -f localhost/memwarn-probe >/dev/null 2>&1
    [ -n "${uid:-}" ] && loginctl disable-linger "$user" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work"
note "$(podman --version), $(crun --version | head -1)"

build_probe_image localhost/memwarn-probe podman
image_checks "podman (root)" localhost/memwarn-probe podman

# Rootless: a user as useradd makes one (subordinate uids and gids in /etc/subuid and /etc/subgid),
# with its systemd user manager (linger) and its D-Bus: podman makes the container's cgroup there.
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user" || fail "useradd $user failed"
uid="$(id -u "$user")"
expect "useradd gave $user no subordinate uids: $(cat /etc/subuid)" grep -q "^$user:" /etc/subuid
loginctl enable-linger "$user" || fail "loginctl enable-linger $user failed"
timeout 60 bash -c "until systemctl is-active --quiet user@$uid.service && [ -S /run/user/$uid/bus ]; do sleep 0.5; done" ||
    fail "user@$uid.service or its D-Bus did not come up: $(systemctl status --no-pager "user@$uid.service" 2>&1 | tail -5)"
manager="/sys/fs/cgroup/user.slice/user-$uid.slice/user@$uid.service"
expect "user@$uid.service has no memory controller delegated: $(cat "$manager/cgroup.controllers")" grep -qw memory "$manager/cgroup.controllers"
as_user() { (cd / && runuser -u "$user" -- env XDG_RUNTIME_DIR="/run/user/$uid" DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" "$@"); }
note "rootless as $user (uid $uid): user@$uid.service delegates: $(cat "$manager/cgroup.controllers"); podman's cgroup manager: $(as_user podman info --format '{{.Host.CgroupManager}} {{.Host.CgroupsVersion}}, storage {{.Store.GraphDriverName}}' 2>&1 | tail -1)"
build_probe_image localhost/memwarn-probe as_user podman
image_checks "podman (rootless)" localhost/memwarn-probe as_user podman
# What the container's root gets (reported): rootless, the user's own uid outside, which owns the
# container's cgroup (delegated), where rootful root is the host's.
for engine in "podman" "as_user podman"; do
    # shellcheck disable=SC2086
    psi="$($engine run --rm --memory 128m --memory-swap 128m --network none --user 0 --entrypoint /usr/local/bin/memwarn localhost/memwarn-probe status --json 2>&1 |
        jq -r '[.monitor.sources[]? | select(test("pressure"))] | join(" | ")' 2>&1)"
    note "${engine/as_user podman/podman (rootless)} as the container's root: $psi"
done
