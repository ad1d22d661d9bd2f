"""Allure reports of lab runs, and the pipelines that keep their trend (docs/reports.md).

README: the agreement between the suites, the CM engine and the report
-----------------------------------------------------------------------

- **Contract violations** are failures whose message contains
  ``contract violation:`` or ``contract FAILED`` (the first words of
  ``Verdict.to_text()``): ``assert verdict.ok, verdict.to_text()`` or
  ``pytest.fail(verdict.to_text())`` both qualify.
- **Wire rules broken** are failures whose message contains ``wire FAILED``
  (the first words of ``WireVerdict.to_text()``).
- **Lab / infrastructure errors** are exceptions of the ``hil.errors.HilError``
  tree (raise them, do not wrap them in AssertionError), the hil plugin's
  ``hil: <Class>: ...`` fixture failures (among them a test's stage that could
  not run: ``hil: LabError: not judged on the wire: ...``), and
  pytest-timeout's timeouts.
- **Host crashed** failures start ``hil: HostCrashed: `` (the message of
  :meth:`hil.host.liveness.Crash.message`).
- Every other assertion failure is a **product failure**, every other
  exception a **test defect**.
- Labels come from test parameters named ``direction`` and ``pull_mode``
  (or ``mode``), from ``provider`` when a test has it, else the driver pair
  setup found on both hosts (never the inventory's claim).
- The session's pair run is observed (:mod:`hil.report.observer`):
  each ``run(name, **params)`` is a step, with its actions as sub-steps and
  its timeline (SVG + JSON), verdict, kernel log and resource counts
  attached; ``Timeline.metrics`` feed the trends.  Each test on the pair is
  observed too (:mod:`hil.report.testobserver`, the events of
  :mod:`hil.run.observer` its :class:`~hil.run.testrun.TestRun` tells): its
  ``kernel`` label, the after-test evidence, kmemleak reports, the wire
  verdict with its exchange and pictures, a crashed host's kernel lines.
  Code that does not go through ``CMSession.run`` calls
  :mod:`hil.report.attach` itself:
  ``step(name, **params)``, ``attach_timeline``, ``attach_verdict``,
  ``attach_kernel_log``, ``attach_resources``, ``attach_pcap``, ``metric``,
  and for the wire ``attach_wire_timeline``, ``attach_wire_verdict``,
  ``attach_exchange`` (all no-ops without ``--alluredir``).

Modules: svg (timeline picture), wirelane (what its wire lane shows),
attach (helpers), observer (pair-run observer), testobserver (each test's
observer: evidence, wire, kernel findings, ``--hil-pcap``,
``--hil-hw-evidence``), crash (a crashed host's kernel lines), plugin
(pytest: labels, the environment, run files), labels (the labels the plugin
gives each test),
environment, categories, executor (run files), history (kept runs, trend),
results (result files read back), flaky (each test's outcome per night, the
flip ranking), quarantine (the known-flaky list), metrics (what tests record,
with labels), metrics_history (``metrics.jsonl``), metrics_flags (thresholds
checked), trend (the charts' page), pipeline (what ci/nightly and
ci/run-suite run).
"""
