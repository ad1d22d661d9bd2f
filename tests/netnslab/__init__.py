"""Test support that tests and bench scripts share: the netns lab of real sshd hosts."""

from netnslab.lab import (
    ALT_SSH_PORT,
    Cable,
    LabHost,
    LabPort,
    NetnsLab,
    cleanup_stale,
)

__all__ = ["ALT_SSH_PORT", "Cable", "LabHost", "LabPort", "NetnsLab", "cleanup_stale"]
