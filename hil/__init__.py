"""hil: hardware-in-the-loop testing for iWARP RNICs.

Layers, each usable alone: ``hil.inventory`` -> ``hil.reservation`` ->
``hil.ssh`` / ``hil.agent`` -> host control (``hil.host``, ``hil.host.linkctl``)
-> ``hil.cm`` -> reporting.  ``hil.plugin`` and ``hil.cli`` are thin shells.
"""

__version__ = "0.1.0"
