#!/usr/bin/env bash
# Prepares the VM test bed (see scripts/vm/README.md and docs/testing.md): installs the host packages it needs, extracts Debian's stock kernel
# (which has IPVS as modules) into a cache directory and builds a busybox initramfs that boots into the host's
# root. Idempotent: a second run only checks packages and the cache. Prints the paths it produced.
#
# Usage: setup.sh [--refresh]
#   --refresh   resolve linux-image-amd64 again (a newer kernel package replaces the cached one)
# Environment: IPVSCTL_VM_DIR (cache, default /var/cache/ipvsctl-vm),
#              IPVSCTL_VM_KERNEL_PKG (a linux-image-* package name instead of what linux-image-amd64 depends on)
set -euo pipefail

. "$(dirname "$0")/lib.sh"

# The guest runs the host's own tools (its root is the host's root), so they are installed here.
PACKAGES=(qemu-system-x86 busybox-static kmod xz-utils ipvsadm keepalived iptables arptables iproute2 procps)
# Loaded by the initramfs, in this order, to reach the host root over virtio-9p and lay the overlay on it.
INITRD_MODULES=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
	netfs fscache 9pnet 9pnet_virtio 9p overlay)

die() {
	echo "setup.sh: $*" >&2
	exit 1
}
say() { echo "setup.sh: $*" >&2; }

refresh=0
case ${1:-} in
--refresh) refresh=1 ;;
"") ;;
-h | --help)
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
	exit 0
	;;
*) die "unknown argument '$1' (usage: setup.sh [--refresh])" ;;
esac

[ "$(id -u)" = 0 ] || die "must run as root: it installs packages and creates device nodes for the initramfs"
export DEBIAN_FRONTEND=noninteractive

apt_updated=0
apt_update() {
	[ "$apt_updated" = 1 ] && return
	say "apt-get update"
	apt-get update -q >&2 || die "apt-get update failed"
	apt_updated=1
}

install_packages() {
	local missing=() p
	for p in "${PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
	done
	[ ${#missing[@]} = 0 ] && return
	apt_update
	say "installing ${missing[*]}"
	apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
}

# Prints the linux-image-VERSION package that linux-image-amd64 depends on.
resolve_kernel_package() {
	if [ -n "${IPVSCTL_VM_KERNEL_PKG:-}" ]; then
		echo "$IPVSCTL_VM_KERNEL_PKG"
		return
	fi
	local pkg
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
	if [ -z "$pkg" ]; then
		apt_update
		pkg=$(apt-cache depends linux-image-amd64 | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
	fi
	[ -n "$pkg" ] || die "cannot tell which kernel package linux-image-amd64 depends on (apt-cache depends linux-image-amd64)"
	echo "$pkg"
}

# Downloads and extracts the kernel package into $VM_DIR/VERSION (boot/vmlinuz-VERSION, lib/modules/VERSION).
extract_kernel() {
	local pkg=$1 kver=$2 kdir=$VM_DIR/$2 work
	[ -f "$kdir/.extracted" ] && return
	work=$(mktemp -d "$VM_DIR/.extract.XXXXXX")
	# apt-get download writes as its _apt user when it can, and warns when it cannot.
	chown _apt "$work" 2>/dev/null || true
	say "downloading $pkg"
	if ! (cd "$work" && apt-get download -q "$pkg" >&2); then
		apt_update
		(cd "$work" && apt-get download -q "$pkg" >&2) || die "apt-get download $pkg failed"
	fi
	say "extracting $pkg"
	dpkg-deb -x "$work"/*.deb "$work/root"
	[ -d "$work/root/lib/modules/$kver" ] || die "$pkg has no lib/modules/$kver"
	[ -f "$work/root/boot/vmlinuz-$kver" ] || die "$pkg has no boot/vmlinuz-$kver"
	# The package ships no modules.dep: the postinst runs depmod on a real install.
	depmod -b "$work/root" "$kver" || die "depmod -b $work/root $kver failed"
	rm -rf "$kdir"
	mv "$work/root" "$kdir"
	rm -rf "$work"
	touch "$kdir/.extracted"
}

# Copies the initramfs modules (decompressed: busybox insmod takes plain .ko) and writes their load order.
copy_initrd_modules() {
	local kdir=$1 kver=$2 dest=$3 mod file
	mkdir -p "$dest"
	: >"$dest/order"
	for mod in "${INITRD_MODULES[@]}"; do
		file=$(modinfo -b "$kdir" -k "$kver" -F filename "$mod" 2>/dev/null | head -n1) ||
			die "module $mod is neither a module nor built into $kver"
		[ -n "$file" ] || die "module $mod is neither a module nor built into $kver"
		case $file in
		"(builtin)") continue ;;
		*.ko) cp "$file" "$dest/$mod.ko" ;;
		*.ko.xz) xz -dc "$file" >"$dest/$mod.ko" ;;
		*.ko.zst) zstd -dcq "$file" >"$dest/$mod.ko" ;;
		*.ko.gz) gzip -dc "$file" >"$dest/$mod.ko" ;;
		*) die "module $mod: unexpected file $file" ;;
		esac
		echo "$mod" >>"$dest/order"
	done
}

# Decompresses the bzImage's payload into an ELF vmlinux, which QEMU boots directly (PVH entry): that skips
# decompressing the kernel under emulation, about 4 s of every boot here. Fails if the payload is not xz.
extract_vmlinux() {
	local bz=$1 out=$2 pos
	pos=$(LC_ALL=C grep -abo $'\xfd7zXZ\x00' "$bz" | head -n1 | cut -d: -f1)
	[ -n "$pos" ] || return 1
	# xz stops at the end of the payload; tail then dies of SIGPIPE, which is expected, hence no pipe.
	xz -dc --single-stream <(tail -c +"$((pos + 1))" "$bz") >"$out.new" 2>/dev/null || return 1
	[ "$(head -c4 "$out.new" | od -An -c | tr -d ' ')" = '177ELF' ] || return 1
	mv "$out.new" "$out"
}

build_initramfs() {
	local kdir=$1 kver=$2 out=$3 work
	work=$(mktemp -d "$VM_DIR/.initramfs.XXXXXX")
	mkdir -p "$work/root/"{bin,dev,proc,sys}
	cp /bin/busybox "$work/root/bin/busybox"
	# The kernel opens /dev/console before /init runs, so the node must be in the archive.
	mknod -m 600 "$work/root/dev/console" c 5 1
	mknod -m 666 "$work/root/dev/null" c 1 3
	install -m 0755 "$VM_SCRIPTS/guest/init" "$work/root/init"
	install -m 0644 "$VM_SCRIPTS/guest/stage2" "$work/root/stage2"
	copy_initrd_modules "$kdir" "$kver" "$work/root/modules"
	(cd "$work/root" && find . | LC_ALL=C sort | busybox cpio -o -H newc 2>/dev/null | gzip -9) >"$work/initramfs.cpio.gz"
	mv "$work/initramfs.cpio.gz" "$out"
	rm -rf "$work"
}

install_packages
[ -x /bin/busybox ] || die "/bin/busybox is missing (package busybox-static)"

mkdir -p "$VM_DIR"
[ -w "$VM_DIR" ] || die "cannot write to $VM_DIR (set IPVSCTL_VM_DIR)"
exec 9>"$VM_DIR/.lock"
flock 9 # another setup.sh (a parallel run.sh) may be building the same cache

if [ "$refresh" = 1 ] || [ ! -s "$VM_DIR/kernel-package" ]; then
	resolve_kernel_package >"$VM_DIR/kernel-package.new"
	mv "$VM_DIR/kernel-package.new" "$VM_DIR/kernel-package"
fi
pkg=$(cat "$VM_DIR/kernel-package")
kver=${pkg#linux-image-}
[ "$kver" != "$pkg" ] || die "$VM_DIR/kernel-package names '$pkg', not a linux-image-VERSION package"
kdir=$VM_DIR/$kver
extract_kernel "$pkg" "$kver"

kernel=$kdir/boot/vmlinuz-$kver
if [ -s "$kdir/vmlinux" ]; then
	kernel=$kdir/vmlinux
elif [ ! -e "$kdir/.no-vmlinux" ] && grep -q '^CONFIG_PVH=y' "$kdir/boot/config-$kver" &&
	extract_vmlinux "$kernel" "$kdir/vmlinux"; then
	kernel=$kdir/vmlinux
else
	rm -f "$kdir/vmlinux.new"
	touch "$kdir/.no-vmlinux"
	say "note: booting the compressed kernel (no PVH entry or no xz payload); boots take a few seconds longer"
fi

inputs=$(vm_inputs_hash)
initrd=$kdir/initramfs.cpio.gz
if [ ! -s "$initrd" ] || [ "$(cat "$kdir/initramfs.inputs" 2>/dev/null)" != "$inputs" ]; then
	say "building $initrd"
	build_initramfs "$kdir" "$kver" "$initrd"
	echo "$inputs" >"$kdir/initramfs.inputs"
fi

cat >"$VM_DIR/vm.env.new" <<ENV
# Written by scripts/vm/setup.sh; read by run.sh.
VM_KVER=$kver
VM_KDIR=$kdir
VM_KERNEL=$kernel
VM_INITRD=$initrd
VM_INPUTS=$inputs
ENV
mv "$VM_DIR/vm.env.new" "$VM_DIR/vm.env"

echo "kernel:    $kernel"
echo "initramfs: $initrd"
echo "modules:   $kdir/lib/modules/$kver"
echo "env:       $VM_DIR/vm.env"
