"""The one-file HTML report of a run (``seqjudge report``): ``render.render_report`` and its template.

Nothing is imported here: ``render`` and ``view`` import their sibling modules through this package, and a
package that imported them back would make that a cycle.
"""
