#!/bin/sh
# Runs inside a lab guest as root, started by vng --exec with the guest's
# config dir (written by hil.lab.bootfiles) as $1: configure, then become
# sshd.  Any failure ends the script, which powers the guest off; its output
# is in DIR/<guest>.log.  The guest's root filesystem is the controller's, so
# the commands run here come from its packages: hil/tools.py lists each (where
# "guest"); add a new one there too.
set -eu
conf=$1
run=/run/hil

mkdir -p "$run" /run/sshd
chmod 700 "$run"
# Copy everything first: the lab dir may be under /root, hidden below.
for f in ssh_host_ed25519_key authorized_keys sshd_config nics sysctls siw bridge; do
    cp "$conf/$f" "$run/$f"
done
chmod 600 "$run/ssh_host_ed25519_key" "$run/authorized_keys"

# vng bind-mounts an /etc/shadow with root locked ("root:!"); sshd without
# PAM refuses a locked account even with a key.  "*" is "no password", not
# locked.  Rewrite in place: the bind mount makes sed -i's rename fail.
sed 's/^root:[^:]*:/root:*:/' /etc/shadow > "$run/shadow"
cat "$run/shadow" > /etc/shadow

# /root is the host's, read-only over 9p, with the host's dotfiles (which
# print noise into every SSH command): give root a fresh writable home.
mount -t tmpfs -o mode=700 tmpfs /root

ip link set dev lo up
# Each line: MAC NAME ADDRESS/PREFIX ADDRESS6/PREFIX ("-": none).  NICs are
# found by their fixed MAC and renamed, so the guest's names match the QEMU
# netdev ids and the inventory.  The IPv6 address skips duplicate address
# detection, as pair setup's does (hil/agent/remote/netlink.py says why).  A NIC
# with no address is a middlebox's bridge port: IPv6 off too, so that it sends
# nothing of its own (no link-local address, no router solicitation) on the cable.
while read -r mac name addr addr6; do
    dev=""
    for d in /sys/class/net/*; do
        if [ "$(cat "$d/address")" = "$mac" ]; then dev=${d##*/}; fi
    done
    if [ -z "$dev" ]; then echo "hil-lab: no NIC with MAC $mac" >&2; exit 1; fi
    if [ "$dev" != "$name" ]; then
        ip link set dev "$dev" down
        ip link set dev "$dev" name "$name"
    fi
    if [ "$addr" = "-" ]; then
        echo 1 > "/proc/sys/net/ipv6/conf/$name/disable_ipv6"
    else
        ip addr add "$addr" dev "$name"
    fi
    if [ "$addr6" != "-" ]; then ip -6 addr add "$addr6" dev "$name" nodad; fi
    ip link set dev "$name" up
done < "$run/nics"

# Each line: key=value, as in sysctl.conf.
while IFS='=' read -r key value; do
    echo "$value" > "/proc/sys/$(echo "$key" | tr . /)"
done < "$run/sysctls"

# The middlebox only (hil lab up --middlebox), one line: BRIDGE PORT...  Its
# ports bridged, with GRO, GSO, TSO and LRO off on each so that it forwards every
# frame as it came, never merged or re-segmented (the offloads hil/host/impair.py
# turns off on any middlebox, by ethtool(8) -k's names); only those that are on
# are turned off (a fixed one cannot be), and one still on stops the boot.  STP
# off and no forward delay: the ports forward at once.
offloads="gro:generic-receive-offload gso:generic-segmentation-offload"
offloads="$offloads tso:tcp-segmentation-offload lro:large-receive-offload"
# Prints "on" when offload $2 (ethtool -k's name) of netdev $1 is on, fixed or not.
offload_on() {
    ethtool -k "$1" | while IFS= read -r line; do
        case "$line" in "$2: on"*) echo on ;; esac
    done
}
while read -r br ports; do
    ip link add name "$br" type bridge stp_state 0 forward_delay 0
    echo 1 > "/proc/sys/net/ipv6/conf/$br/disable_ipv6"
    for port in $ports; do
        for o in $offloads; do
            if [ "$(offload_on "$port" "${o#*:}")" = on ]; then ethtool -K "$port" "${o%%:*}" off; fi
            if [ "$(offload_on "$port" "${o#*:}")" = on ]; then
                echo "hil-lab: cannot turn ${o%%:*} off on $port" >&2; exit 1
            fi
        done
        ip link set dev "$port" master "$br"
    done
    ip link set dev "$br" up
done < "$run/bridge"

# Each line: RDMA_DEVICE NETDEV.  siw is created here so the lab is ready
# without the framework's siw fallback.
while read -r rdmadev netdev; do
    rdma link add "$rdmadev" type siw netdev "$netdev"
done < "$run/siw"

# OpenSSH before 9.8 executes itself anew for each connection, which costs a
# TCG guest about 0.35 s of CPU per connection (docs/notes/lab-speed.md); -r
# forks the listener instead.  A throwaway test guest needs no fresh address
# space per connection; an sshd that does not take -r runs as it is.
reexec=
if /usr/sbin/sshd -t -r -f "$run/sshd_config" 2>/dev/null; then
    reexec=-r
fi
echo "hil-lab: $(hostname) configured; starting sshd $reexec"
exec /usr/sbin/sshd -D -e $reexec -f "$run/sshd_config"
