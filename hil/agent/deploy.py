"""Put the agent zipapp on a host over SFTP, once per build.

The file goes to ``~/.cache/hil/agent/<sha256>.pyz`` of the SSH user: the
name is the content hash, so an upload is skipped when a file of that name
and size is already there, and a new build never overwrites an old one that
another run may be executing.  Uploads go to a temporary name first and are
renamed into place, so a reader never sees half a file.
"""

from __future__ import annotations

import logging
import os
import posixpath
import stat

import paramiko

from hil.agent.build import Bundle
from hil.errors import AgentError
from hil.ssh import SSHSession

REMOTE_DIR = ".cache/hil/agent"  # relative to the SSH user's home
log = logging.getLogger("hil.agent.deploy")


def remote_path(home: str, bundle: Bundle, remote_dir: str = REMOTE_DIR) -> str:
    """Where ``bundle`` lives on a host whose SSH user's home is ``home``."""
    return posixpath.join(home, remote_dir, f"{bundle.sha256}.pyz")


def _makedirs(sftp: paramiko.SFTPClient, path: str) -> None:
    parts = path.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        d = "/" + "/".join(parts[:i])
        try:
            mode = sftp.stat(d).st_mode
            if mode is None or not stat.S_ISDIR(mode):
                raise NotADirectoryError(f"{d} exists and is not a directory")
        except FileNotFoundError:
            sftp.mkdir(d, 0o700)


def _cached(sftp: paramiko.SFTPClient, path: str, size: int) -> bool:
    try:
        return sftp.stat(path).st_size == size
    except FileNotFoundError:
        return False


def push(session: SSHSession, bundle: Bundle, host: str, remote_dir: str = REMOTE_DIR) -> str:
    """Make sure ``bundle`` is on the host; returns its absolute remote path.

    ``remote_dir`` is relative to the SSH user's home, or absolute.
    """
    try:
        sftp = session.sftp()
        path = remote_path(sftp.normalize("."), bundle, remote_dir)
        if _cached(sftp, path, bundle.size):
            log.info("%s: agent %s already there", host, bundle.sha256[:12])
            return path
        _makedirs(sftp, posixpath.dirname(path))
        tmp = f"{path}.tmp{os.getpid()}"
        sftp.put(str(bundle.path), tmp)
        sftp.posix_rename(tmp, path)
        log.info("%s: uploaded agent %s (%d bytes)", host, bundle.sha256[:12], bundle.size)
        return path
    except (OSError, EOFError, paramiko.SSHException) as e:
        raise AgentError(
            host,
            f"cannot upload the agent to {remote_dir} over SFTP: {e}; "
            "check the SSH user's home is writable and the sftp subsystem is enabled",
        ) from None
