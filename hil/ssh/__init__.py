"""The SSH transport to lab hosts, on paramiko.

``SSHPool(inventory).get(name)`` gives the one ``SSHSession`` per host that
commands (``run``), uploads (``put_file``, ``sftp``) and long-running
processes such as the agent (``open_process``) share.  Host keys are checked
against known_hosts; errors are the ``hil.errors.SSHError`` branch.
See docs/ssh.md.
"""

from hil.ssh.channel import RemoteProcess
from hil.ssh.endpoint import Endpoint
from hil.ssh.hostkeys import fingerprint
from hil.ssh.pool import SSHPool
from hil.ssh.session import Result, SSHSession

__all__ = ["Endpoint", "RemoteProcess", "Result", "SSHPool", "SSHSession", "fingerprint"]
