"""Test support that tests and bench scripts share: the netns lab of real sshd hosts."""

from hil.testing.netnslab import Cable, LabHost, LabPort, NetnsLab, cleanup_stale

__all__ = ["Cable", "LabHost", "LabPort", "NetnsLab", "cleanup_stale"]
