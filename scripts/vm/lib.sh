# shellcheck shell=bash disable=SC2034
# Shared by setup.sh and run.sh (sourced, not executed).

# The cache holds the extracted kernel and the initramfs: hundreds of MB that never go into git.
VM_DIR=${IPVSCTL_VM_DIR:-/var/cache/ipvsctl-vm}
VM_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# What the initramfs is built from. When any of these files changes, the cached initramfs is stale.
vm_inputs_hash() {
	cat "$VM_SCRIPTS/setup.sh" "$VM_SCRIPTS/lib.sh" "$VM_SCRIPTS/guest/init" "$VM_SCRIPTS/guest/stage2" |
		sha256sum | cut -d' ' -f1
}
