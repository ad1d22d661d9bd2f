"""A fuzz run whose case crashes the DUT, on the session's virtual lab (real siw in QEMU).

The base scenario ``mpa-reply-pd-too-long`` stops siw's initiator up to 6.12.118
(docs/findings/siw-mpa-reply-pdlen-null-deref.md): case 0 of seed 1 crashes guest A,
the DUT.  The run must tell the crash as that known kernel finding (from the real
report's title and frames, suites/known-kernel-findings.yaml), save it, recover the
guest (its power cycled, the pair set up again, :meth:`hil.run.peercase.DutCheck.recover`)
and go on: case 1 then runs on the recovered pair, whose normal connect afterwards must
hold.  With the entry's fuzz trigger (PD_Length above siw's 256) the fuzzer would not
have run case 0 on this kernel at all: the check says so, from the guest's own release.
About 45 s (one guest restart on TCG); it restarts a guest, so it runs after the others.
"""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest
from vlab import VirtualLab, lab_pair_run

from hil.cli.peer_cmd import Cases, Crashes, fuzz_run
from hil.errors import EXIT_OK
from hil.host.liveness import DEFAULT_BOUND
from hil.judge import known
from hil.peer.builtin import SCENARIOS
from hil.peer.fuzz import make_case
from hil.peer.scenario import load
from hil.run.peercase import DutCheck
from hil.run.testparts import TestOptions

pytestmark = [pytest.mark.lab, pytest.mark.restarts_guests]

RECOVERY_BOUND = 300.0  # a TCG guest booting on a loaded 2-core machine
BASE = "mpa-reply-pd-too-long"
ROOT = Path(__file__).resolve().parents[2]
KNOWN = known.load(ROOT / "suites" / "known-kernel-findings.yaml", ROOT)


def test_a_case_that_crashes_the_dut_is_saved_the_dut_recovered_and_the_run_goes_on(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    err, out = io.StringIO(), tmp_path / "out"
    out.mkdir()
    with lab_pair_run(virtual_lab, tmp_path, "peer fuzz crash lab test") as run:
        dut_host = run.pair.host_a.name
        options = TestOptions(wire=False, liveness_s=DEFAULT_BOUND)
        # Without its fuzz trigger, so that the case runs (and crashes) to be told apart.
        untriggered = tuple(replace(f, fuzz_trigger=None) for f in KNOWN)
        dut = DutCheck(run, "a", options, known=untriggered)
        try:
            code = fuzz_run(
                dut,
                [SCENARIOS[BASE]],
                Cases(seed=1, count=2),
                out,
                err,
                crashes=Crashes(most=1, timeout_s=RECOVERY_BOUND),
            )
        finally:
            dut.close()
        said = err.getvalue()
        if f"host crashed: {BASE}-fuzz-1-0" not in said:
            pytest.fail(f"case 0 did not crash the DUT (a kernel with the fix?):\n{said}")
        # The known finding, not a new one: the run found nothing new.
        assert (
            f"hil: KNOWN host crashed: {BASE}-fuzz-1-0: known kernel finding "
            f"siw-mpa-reply-pdlen-null-deref on {dut_host}: BUG: kernel NULL pointer" in said
        ), said
        assert code == EXIT_OK and "FINDING" not in said, said
        assert f"hil: {dut_host}: power cycle" in said, said
        assert f"hil: {dut_host} recovered and the pair set up again; the run goes on" in said
        # Case 1 ran on the recovered pair: no crash (that would be one too many), and
        # its check (kernel log, resources, a normal connect) passed.
        assert "hil: 2/2 cases, " in said and "1 crashes recovered" in said, said
        assert "--max-crashes 1" not in said, said
        case1 = next(s for s, c in dut.checks.items() if s.name == f"{BASE}-fuzz-1-1")
        assert not dut.checks[case1].failed and not dut.checks[case1].error, dut.checks[case1]
        saved = load(out / f"{BASE}-fuzz-1-0.yaml")
        assert "crashed a host; not shrunk" in saved.description
        assert "BUG: kernel NULL pointer dereference" in saved.description
        # With it, the fuzzer holds the case back on this DUT's kernel (read on the guest).
        dut.known = KNOWN
        case0 = make_case([SCENARIOS[BASE]], 1, 0).scenario
        held = dut.not_run(case0)
        assert held.startswith("it sends mpa_reply pd_length 514, which stops 6.1."), held
        (health,) = run.store.host_health([dut_host])
        assert health.state == "healthy", health  # the recovery's health check passed
        assert "kernel_crash" in [r.event for r in run.store.host_history(dut_host)]
