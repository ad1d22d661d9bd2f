"""Holder identity, claims and the public names of hil.reservation."""

from __future__ import annotations

import os
import socket

import pytest

import hil.reservation
from hil.errors import InputError
from hil.reservation import Claim, Holder

CI_VARS = (
    "CI_JOB_URL",
    "BUILD_URL",
    "BUILDKITE_BUILD_URL",
    "GITHUB_SERVER_URL",
    "GITHUB_REPOSITORY",
    "GITHUB_RUN_ID",
)


@pytest.fixture(autouse=True)
def no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in CI_VARS:
        monkeypatch.delenv(var, raising=False)


def test_current_holder_is_this_process() -> None:
    me = Holder.current("smoke")
    assert (me.hostname, me.pid, me.note, me.ci_job_url) == (
        socket.gethostname(),
        os.getpid(),
        "smoke",
        None,
    )
    assert str(me) == f"{me.user}@{me.hostname} pid {me.pid} (smoke)"


@pytest.mark.parametrize(
    "env,url",
    [
        (
            {"CI_JOB_URL": "https://gitlab.example/lab/-/jobs/9"},
            "https://gitlab.example/lab/-/jobs/9",
        ),
        ({"BUILD_URL": "https://jenkins.example/job/x/3/"}, "https://jenkins.example/job/x/3/"),
        (
            {
                "GITHUB_SERVER_URL": "https://github.example",
                "GITHUB_REPOSITORY": "lab/hil",
                "GITHUB_RUN_ID": "77",
            },
            "https://github.example/lab/hil/actions/runs/77",
        ),
    ],
)
def test_ci_job_url_comes_from_the_ci_environment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    me = Holder.current()
    assert me.ci_job_url == url
    assert str(me).endswith(f" <{url}>")


def test_holder_round_trips_through_json() -> None:
    h = Holder("alice", "ci-1", 42, "https://ci.example/1", "note")
    assert Holder.from_json(h.to_json()) == h


@pytest.mark.parametrize("pair,hosts", [("", ("a", "b")), ("p", ("a", "")), ("p", ("a",))])
def test_claim_needs_a_name_and_two_hosts(pair: str, hosts: tuple[str, str]) -> None:
    with pytest.raises(InputError, match="a claim needs"):
        Claim(pair, hosts)


def test_public_names() -> None:
    for name in (
        "Holder",
        "Claim",
        "Lease",
        "Store",
        "open_store",
        "reserve",
        "Heartbeat",
        "JournalEntry",
    ):
        assert name in hil.reservation.__all__
    assert all(hasattr(hil.reservation, n) for n in hil.reservation.__all__)
