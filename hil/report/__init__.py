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
  ``hil: <Class>: ...`` fixture failures, and pytest-timeout's timeouts.
- Every other assertion failure is a **product failure**, every other
  exception a **test defect**.
- Labels come from test parameters named ``direction`` and ``pull_mode``
  (or ``mode``), from ``provider`` when a test has it, else the driver pair
  setup found on both hosts (never the inventory's claim).
- The session's pair run is observed (:mod:`hil.report.observer`):
  each ``run(name, **params)`` is a step, with its actions as sub-steps and
  its timeline (SVG + JSON), verdict, kernel log and resource counts
  attached; ``Timeline.metrics`` feed the trends.  Code that does not go
  through ``CMSession.run`` calls :mod:`hil.report.attach` itself:
  ``step(name, **params)``, ``attach_timeline``, ``attach_verdict``,
  ``attach_kernel_log``, ``attach_resources``, ``attach_pcap``, ``metric``,
  and for the wire ``attach_wire_timeline``, ``attach_wire_verdict``,
  ``attach_exchange`` (all no-ops without ``--alluredir``).

Modules: svg (timeline picture), wirelane (what its wire lane shows),
attach (helpers), observer (pair-run observer), plugin (pytest: the
``pytest_hil_wire`` attachments and ``--hil-pcap``, run files), labels (the
labels the plugin gives each test),
environment, categories, executor (run files), history (kept runs, trend),
results (result files read back), flaky (each test's outcome per night, the
flip ranking), quarantine (the known-flaky list), metrics (what tests record,
with labels), metrics_history (``metrics.jsonl``), metrics_flags (thresholds
checked), trend (the charts' page), pipeline (what ci/nightly and
ci/run-suite run).
"""
