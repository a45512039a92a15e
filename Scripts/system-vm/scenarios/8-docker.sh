# Docker Engine as Debian 13 ships it (docker.io 26 with containerd and runc): the image of
# Examples/container/Containerfile.prebuilt, built by podman and saved as a docker-archive
# tarball, loaded with docker load, and run with docker run --memory 128m.
#   Inside, memwarn status reads the container's cgroup as / and 128 MiB from memory.max, and its
#   monitor arms; memwarn-growth-probe (the README's service) survives growth to three times the
#   limit; without memwarn's releases, exit 137.
# The VM has no network modules (only brd is loaded): the daemon runs without its bridge and
# iptables rules (/etc/docker/daemon.json), and the containers with --network none.
work=/var/lib/memwarn-system/docker
cleanup() {
    docker rmi -f memwarn-probe:latest >/dev/null 2>&1
    podman rmi -f localhost/memwarn-probe >/dev/null 2>&1
    systemctl stop docker.service docker.socket containerd.service 2>/dev/null
    rm -rf "$work" /etc/docker/daemon.json
}
trap cleanup EXIT
load_module overlay  # before the daemon starts: its storage driver (overlay2) needs it
mkdir -p "$work" /etc/docker
printf '{"bridge": "none", "iptables": false, "ip6tables": false}\n' >/etc/docker/daemon.json
systemctl start docker.service || fail "docker.service did not start: $(journalctl -u docker.service --no-pager | tail -8)"
timeout 60 bash -c 'until docker info >/dev/null 2>&1; do sleep 0.5; done' || fail "the docker daemon does not answer"
note "$(docker version --format 'Docker Engine {{.Server.Version}}, containerd {{(index .Server.Components 1).Version}}' 2>/dev/null || docker --version); $(docker info --format 'cgroup driver {{.CgroupDriver}}, cgroup v{{.CgroupVersion}}, storage {{.Driver}}, runtime {{.DefaultRuntime}}')"

build_probe_image localhost/memwarn-probe podman
podman save --quiet --format docker-archive -o "$work/memwarn-probe.tar" localhost/memwarn-probe:latest || fail "podman save failed"
loaded="$(docker load -i "$work/memwarn-probe.tar")" || fail "docker load failed: $loaded"
docker tag localhost/memwarn-probe:latest memwarn-probe:latest 2>/dev/null || true
note "docker load: $loaded"
image_checks "docker" memwarn-probe:latest docker
