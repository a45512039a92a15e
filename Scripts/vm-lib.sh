# Sourced by the VM stages (Scripts/v2-vm-test, Scripts/system-vm-test): what both need from
# Debian's packages and from the build. Nothing else is downloaded.
#   linux-image-cloud-amd64   the metapackage, resolved to its linux-image-<version>-cloud-amd64,
#                             fetched with apt-get download and unpacked with dpkg -x (not installed)
#   busybox-static            fetched and unpacked the same way
#   the products              static executables in $scratch (libcgroup.a links in statically)
# The caller sets: vm_name (for messages), cache (a folder, made absolute here), scratch (the
# static build's folder), products (the executables to build), refresh (1: fetch again), and
# kernel_dir when it boots another kernel than fetch_kernel's ($cache/kernel).
# shellcheck shell=bash
started=$SECONDS
say() { echo "== $vm_name [$((SECONDS - started))s] $*" >&2; }
die() { echo "$vm_name: $*" >&2; exit 1; }

mkdir -p "$cache"
cache="$(cd "$cache" && pwd)"    # absolute: apt-get download runs in a sub-folder
: >"$cache/apt.log"              # this run's apt output only (empty when nothing was fetched)
export DEBIAN_FRONTEND=noninteractive

# apt's package lists, refreshed once per run and only when a package is actually needed.
apt_lists_fresh=0
apt_update_once() {
    if [ "$apt_lists_fresh" -eq 0 ]; then
        say "apt-get update"
        apt-get update -qq >>"$cache/apt.log" 2>&1 || { cat "$cache/apt.log" >&2; die "apt-get update failed"; }
        apt_lists_fresh=1
    fi
}

# Installs a Debian package when the command it provides is missing.
install_when_missing() {
    local command_name="$1" package="$2"
    command -v "$command_name" >/dev/null 2>&1 && return 0
    [ "$(id -u)" -eq 0 ] || die "$package is missing; install it: sudo apt-get install -y --no-install-recommends $package"
    apt_update_once
    say "installing $package"
    apt-get install -y -qq --no-install-recommends "$package" >>"$cache/apt.log" 2>&1 ||
        { tail -20 "$cache/apt.log" >&2; die "apt-get install $package failed"; }
}

# Downloads one package's .deb into a folder (apt-get download writes to the current one);
# prints the file's path. Refreshes the package lists once if apt does not know the package.
download_deb() {
    local package="$1" folder="$2"
    mkdir -p "$folder"
    if ! apt-cache show "$package" >/dev/null 2>&1; then apt_update_once; fi
    (cd "$folder" && apt-get download -q "$package" >>"$cache/apt.log" 2>&1) ||
        { apt_update_once; (cd "$folder" && apt-get download -q "$package" >>"$cache/apt.log" 2>&1); } ||
        { tail -5 "$cache/apt.log" >&2; die "apt-get download $package failed"; }
    # apt names the file <name>_<version with ':' as %3a>_<arch>.deb; the newest is ours.
    ls -t "$folder/${package%%=*}"_*.deb | head -1
}

# The kernel: the cloud metapackage names the real image package in its Depends.
fetch_kernel() {
    local kernel_dir="$cache/kernel"
    if [ "$refresh" -eq 0 ] && [ -f "$kernel_dir/vmlinuz" ] && [ -f "$kernel_dir/modules/brd.ko" ] && [ -f "$kernel_dir/modules/overlay.ko" ]; then
        say "kernel: cached $(cat "$kernel_dir/package")"
        return
    fi
    rm -rf "$cache/debs" "$kernel_dir"
    say "kernel: apt-get download linux-image-cloud-amd64"
    local meta real_package real_deb
    meta="$(download_deb linux-image-cloud-amd64 "$cache/debs")"
    real_package="$(kernel_package_of "$meta")"
    say "kernel: apt-get download $real_package"
    real_deb="$(download_deb "$real_package" "$cache/debs")"
    unpack_kernel "$real_deb" "$kernel_dir" "$real_package"
    rm -rf "$cache/debs"
}

# The real image package the cloud metapackage (a .deb) depends on, as NAME=VERSION.
kernel_package_of() {
    local meta="$1" real_package
    # Depends: linux-image-6.1.0-56-cloud-amd64 (= 6.1.192-2)
    real_package="$(dpkg-deb -f "$meta" Depends | sed -E 's/^ *([^ ,]+) *\(= *([^)]+)\).*/\1=\2/')"
    [[ "$real_package" == linux-image-*-cloud-amd64=* ]] || die "unexpected Depends in $meta: $(dpkg-deb -f "$meta" Depends)"
    echo "$real_package"
}

# Unpacks a kernel image package (not installed) into a folder: vmlinuz, its config, and of the
# modules only brd (the system VM makes a RAM disk with it, for file-backed pages: its root is a
# tmpfs) and overlay (Podman's and Docker's image storage), uncompressed (Debian 13 ships modules
# xz-compressed; the VM loads them with insmod). The serial console, cgroup2, memcg and PSI are
# built in: checked here.
unpack_kernel() {  # deb folder label
    local deb="$1" kernel_dir="$2" label="$3" unpacked module name
    unpacked="$(mktemp -d "$cache/unpack.XXXXXX")"
    dpkg -x "$deb" "$unpacked"
    rm -rf "$kernel_dir"
    mkdir -p "$kernel_dir/modules"
    cp "$unpacked"/boot/vmlinuz-* "$kernel_dir/vmlinuz"
    cp "$unpacked"/boot/config-* "$kernel_dir/config"
    for name in drivers/block/brd fs/overlayfs/overlay; do
        # Under /lib/modules (Debian 12) or /usr/lib/modules (Debian 13).
        module="$(find "$unpacked"/lib/modules "$unpacked"/usr/lib/modules -path "*/kernel/$name.ko*" 2>/dev/null | head -1 || true)"
        case "$module" in
            *.ko) cp "$module" "$kernel_dir/modules/${name##*/}.ko" ;;
            *.ko.xz) xz -dc "$module" >"$kernel_dir/modules/${name##*/}.ko" ;;
            *.ko.zst) zstd -qdc "$module" >"$kernel_dir/modules/${name##*/}.ko" ;;
            "") die "the kernel package has no ${name##*/} module" ;;
            *) die "the ${name##*/} module is compressed in a way this script does not know ($module)" ;;
        esac
    done
    rm -rf "$unpacked"
    for option in CONFIG_SERIAL_8250_CONSOLE=y CONFIG_MEMCG=y CONFIG_PSI=y CONFIG_BLK_DEV_INITRD=y CONFIG_RD_GZIP=y; do
        grep -qx "$option" "$kernel_dir/config" || die "the kernel lacks $option"
    done
    echo "$label" >"$kernel_dir/package"
}

# busybox-static: the VM's shell, mount, timeout, poweroff.
fetch_busybox() {
    local busybox_dir="$cache/busybox"
    if [ "$refresh" -eq 0 ] && [ -x "$busybox_dir/busybox" ]; then
        say "busybox: cached"
        return
    fi
    say "busybox: apt-get download busybox-static"
    local deb unpacked
    deb="$(download_deb busybox-static "$cache/debs")"
    unpacked="$(mktemp -d "$cache/unpack.XXXXXX")"
    dpkg -x "$deb" "$unpacked"
    mkdir -p "$busybox_dir"
    cp "$unpacked/bin/busybox" "$busybox_dir/busybox"
    rm -rf "$unpacked" "$cache/debs"
}

# The products as static executables (libcgroup.a from libcgroup-dev links in statically).
build_products() {
    if ! pkg-config --exists libcgroup 2>/dev/null; then
        apt_update_once
        say "installing libcgroup-dev"
        apt-get install -y -qq libcgroup-dev pkg-config >>"$cache/apt.log" 2>&1 || die "apt-get install libcgroup-dev failed"
    fi
    [ -f "$(pkg-config --variable=libdir libcgroup)/libcgroup.a" ] || die "libcgroup-dev ships no libcgroup.a here: cannot link statically"
    local log="$cache/build.log"
    : >"$log"
    for product in "${products[@]}"; do
        say "building $product (static, release)"
        if ! swift build -c release --product "$product" --scratch-path "$scratch" \
            --static-swift-stdlib -Xswiftc -static-executable >>"$log" 2>&1; then
            grep -E "error" "$log" | sort -u | head -40 >&2
            die "building $product failed; the whole log is in $log"
        fi
    done
    # Static glibc warns about getpwnam and dlopen at link time (not our code); ours must be clean.
    if grep -E "^$(pwd)/Sources/.*warning:" "$log" | sort -u; then
        die "the static build has warnings in memwarn's own code (see $log)"
    fi
}

# Boots the cache's kernel with an initramfs under bounded memory (vm_memory MiB) and time
# (vm_timeout s), the console to the terminal and to a log, and judges the verdict line the
# guest prints: "<MARKER>: PASS" passes, "<MARKER>: FAIL n" fails, no line (a hang, a crash, a
# timeout) fails. Arguments: initramfs, kernel command line, marker, console log. The caller may
# name a function in vm_before_boot: it runs before each boot, with the console log's path.
#
# A fault of the guest kernel's own (see guest_kernel_fault) with no verdict line and no failed
# scenario boots the VM once more, and says so (also on the PASS line); the first boot's console
# is kept beside the log (.first-boot.log). Software emulation (TCG, with a thread per virtual
# CPU) has faulted this way here, before or beside anything of memwarn's: a CPU locked up in
# systemd-tmpfiles during the boot (Debian 12's kernel), and an int3 oops where the kernel was
# patching its own code (Debian 13's). A fault that a scenario's load provokes comes back on the
# second boot, which then fails. A scenario that failed (a "FAIL " line), a second fault, a hang
# without a fault and a panic for any other reason (out of memory included) fail at once.
# softlockup_panic=1 and oops=panic end a faulted guest at once (panic=-1 reboots, which
# -no-reboot turns into QEMU's exit), not at the time bound; watchdog_thresh=30 reports a CPU
# as locked up after 60 s, not 20, so that a virtual CPU the host starved for a while is not one.
boot_and_judge() {
    local initramfs="$1" append="$2 softlockup_panic=1 oops=panic watchdog_thresh=30" marker="$3" console="$4"
    local attempt qemu_status verdict fault retried=""
    rm -f "${console%.log}.first-boot.log"
    for attempt in 1 2; do
        if [ "$attempt" -eq 2 ]; then
            mv "$console" "${console%.log}.first-boot.log"
            retried="the first boot ended in a guest kernel fault ($fault; its console: ${console%.log}.first-boot.log)"
            say "$retried, with no verdict and no failed scenario: booting once more"
        fi
        : >"$console"
        [ -n "${vm_before_boot:-}" ] && "$vm_before_boot" "$console"
        say "booting the VM (-accel $vm_accel, ${vm_memory} MiB, at most ${vm_timeout} s)"
        set +e
        timeout --kill-after=10 "$vm_timeout" qemu-system-x86_64 \
            -accel "$vm_accel" -m "$vm_memory" -smp 2 -nographic -no-reboot \
            -kernel "${kernel_dir:-$cache/kernel}/vmlinuz" -initrd "$initramfs" \
            -append "$append" </dev/null 2>&1 | stdbuf -o0 tr -d '\r' | tee "$console"
        qemu_status=${PIPESTATUS[0]}
        set -e
        [ "$qemu_status" -eq 124 ] && echo "$vm_name: the VM did not finish within ${vm_timeout} s" >&2
        verdict="$(grep -aoE "$marker: (PASS|FAIL [0-9]+)" "$console" | tail -1 || true)"
        say "VM finished (qemu status $qemu_status); console log: $console"
        fault="$(guest_kernel_fault "$console")"
        if [ -z "$verdict" ] && [ -n "$fault" ] && [ "$attempt" -eq 1 ] && ! grep -aq '^FAIL ' "$console"; then continue; fi
        break
    done
    case "$verdict" in
        "$marker: PASS") say "PASS${retried:+ on the second boot: $retried}"; return 0 ;;
        "") die "no verdict line from the VM: it hung, crashed or timed out (qemu status $qemu_status)${fault:+; the guest kernel faulted: $fault}$(grep -a '^FAIL ' "$console" | head -3 | sed 's/^/; /' | tr -d '\n')" ;;
        *) die "the scenarios failed: ${verdict#"$marker": }" ;;
    esac
}

# The first line of a console log where the guest kernel reports a fault in its own code: a CPU
# locked up (the watchdog), an oops, a kernel BUG, a bad page access or instruction in the kernel.
# Empty when there is none. Out of memory, and panics for any other reason, are not such faults.
guest_kernel_fault() {  # console log
    grep -aoE '\[ *[0-9]+\.[0-9]+\] (watchdog: BUG: soft lockup.*|Oops: .*|kernel BUG at .*|BUG: unable to handle .*|general protection fault.*|invalid opcode: .*)' "$1" |
        head -1 | sed -E 's/^\[ *[0-9.]+\] //' || true
}
