"""What a lab guest boots with: keys, sshd config, NIC and sysctl lists.

For each guest ``DIR/<name>.d/`` holds the files ``guest_boot.sh`` reads
inside the guest (the guest sees the host's filesystem read-only over 9p);
the middlebox's ``bridge`` names the bridge it makes of its data NICs.
The lab's client key is ``DIR/id_ed25519``; the guests' host keys are in
``DIR/known_hosts`` as ``[127.0.0.1]:PORT`` entries.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from hil import tools
from hil.errors import LabError
from hil.lab.network import Cable, Nic, data_nics, mgmt_nic

BOOT_SCRIPT = Path(__file__).with_name("guest_boot.sh")
CLIENT_KEY = "id_ed25519"
KNOWN_HOSTS = "known_hosts"
KEYGEN_TIMEOUT = 30.0
BRIDGE = "br0"  # the middlebox guest's bridge of its two data NICs

# Make a pulled cable observable within a suite's time: with tcp_retries2=5
# a connection with data in flight gives up after ~12 s (default 15 retries:
# ~15 min); keepalive probes an idle one within ~16 s; a SYN to a dead peer
# fails after ~15 s.
GUEST_SYSCTLS: tuple[tuple[str, str], ...] = (
    ("net.ipv4.tcp_retries2", "5"),
    ("net.ipv4.tcp_syn_retries", "3"),
    ("net.ipv4.tcp_keepalive_time", "10"),
    ("net.ipv4.tcp_keepalive_intvl", "2"),
    ("net.ipv4.tcp_keepalive_probes", "3"),
)

SSHD_CONFIG = """\
# sshd of a hil lab guest, written by hil.lab.bootfiles
Port 22
ListenAddress 0.0.0.0
HostKey /run/hil/ssh_host_ed25519_key
AuthorizedKeysFile /run/hil/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PidFile /run/hil/sshd.pid
Subsystem sftp /usr/lib/openssh/sftp-server
"""


def rdma_device(netdev: str) -> str:
    """The siw device the lab creates on ``netdev``."""
    return f"siw_{netdev}"


def keygen(path: Path, comment: str) -> str:
    """Make an ed25519 key pair at ``path``; returns the public line."""
    argv = tools.argv("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))
    try:
        out = subprocess.run(
            argv, capture_output=True, text=True, timeout=KEYGEN_TIMEOUT, check=False
        )
    except FileNotFoundError as e:
        raise LabError("ssh-keygen not found: apt-get install openssh-client") from e
    except subprocess.TimeoutExpired as e:
        raise LabError(f"ssh-keygen took over {KEYGEN_TIMEOUT:.0f} s making {path}") from e
    if out.returncode != 0:
        raise LabError(f"ssh-keygen failed making {path}: {out.stderr.strip()}")
    return path.with_name(path.name + ".pub").read_text().strip()


def guest_conf_dir(lab_dir: Path, name: str) -> Path:
    """Where guest ``name``'s boot files are."""
    return lab_dir / f"{name}.d"


def write_client_key(lab_dir: Path) -> str:
    """The lab's client key (made once per lab); returns its public line."""
    key = lab_dir / CLIENT_KEY
    if key.exists():
        return key.with_name(key.name + ".pub").read_text().strip()
    return keygen(key, "hil-lab-client")


def write_guest(
    lab_dir: Path, index: int, name: str, lab_cables: list[Cable], client_pub: str
) -> str:
    """Write guest ``index``'s boot files; returns its public host key line."""
    conf = guest_conf_dir(lab_dir, name)
    conf.mkdir(mode=0o700, exist_ok=True)
    hostkey = conf / "ssh_host_ed25519_key"
    for old in (hostkey, hostkey.with_name(hostkey.name + ".pub")):
        old.unlink(missing_ok=True)
    host_pub = keygen(hostkey, f"hil-lab-{name}")
    (conf / "authorized_keys").write_text(client_pub + "\n")
    (conf / "sshd_config").write_text(SSHD_CONFIG)
    mgmt = mgmt_nic(index)
    data = [n for _, n in data_nics(index, lab_cables)]
    nics = [(n.mac, n.netdev, n.address, n.address6) for n in (mgmt, *data)]
    # "-": no address (a bridge port) or no IPv6 address (the management NIC);
    # guest_boot.sh reads the four columns.
    (conf / "nics").write_text("".join(f"{m} {n} {a or '-'} {a6 or '-'}\n" for m, n, a, a6 in nics))
    (conf / "sysctls").write_text("".join(f"{k}={v}\n" for k, v in GUEST_SYSCTLS))
    siw = [(rdma_device(n.netdev), n.netdev) for n in data if n.address is not None]
    (conf / "siw").write_text("".join(f"{d} {n}\n" for d, n in siw))
    (conf / "bridge").write_text(bridge_line(data))
    return host_pub


def bridge_line(data: list[Nic]) -> str:
    """The ``bridge`` file's line for a guest whose data NICs have no address (the
    middlebox: ``BRIDGE PORT PORT``), else nothing."""
    ports = [n.netdev for n in data if n.address is None]
    return f"{BRIDGE} {' '.join(ports)}\n" if ports else ""


def write_known_hosts(lab_dir: Path, entries: list[tuple[int, str]]) -> Path:
    """``DIR/known_hosts`` from (ssh port, public host key line) pairs."""
    lines = []
    for port, pub in entries:
        keytype, blob = pub.split()[:2]
        lines.append(f"[127.0.0.1]:{port} {keytype} {blob}\n")
    path = lab_dir / KNOWN_HOSTS
    path.write_text("".join(lines))
    return path
