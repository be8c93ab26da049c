"""The one-file HTML report of a run (``seqjudge report``): ``render_report`` and its template."""

from seqjudge.outputs.html.render import Calibration, json_for_script, render_report

__all__ = ["Calibration", "json_for_script", "render_report"]
