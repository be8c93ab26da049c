"""Everything seqjudge writes for people and for other tools, one module per format or view.

- ``registry``: the formats each view has and the one way a command picks one (``--format``);
- ``streams``: where output goes (stdout or a file) and how it is buffered;
- ``check``: `seqjudge check`'s text, JSON and JSONL;
- ``judged``: `seqjudge judge`'s engine-beside-judge views; ``summary``: `seqjudge run`'s summary and
  estimate; ``listings``: the stored runs and the review queue as text; ``comparison``: `seqjudge compare`;
  ``calibration``: `seqjudge calibrate`'s report; ``calibrate_plot``: its PNG;
- ``textview``: the plain-text pieces they share (the FAIL block, the numbered call list, totals);
- ``ci_outputs``: JUnit XML, GitHub annotations and job summaries, pull-request markdown;
- ``alerts``: webhook alerts;
- ``html/``: the self-contained HTML report of a run.

Adding a format: one module here and one line in ``registry.FORMATS``.
"""
