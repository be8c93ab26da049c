"""Everything seqjudge writes for people and for other tools, one module per view or format.

- ``registry``: the formats each view has and the one way a command picks one (``--format``);
- ``streams``: where output goes (stdout or a file) and how it is buffered;
- ``check``: `seqjudge check`'s text, JSON and JSONL, and the protocol every `check` format follows (each
  streams); ``sarif``: the same reports as SARIF 2.1.0; ``check_ci``: JUnit and markdown from `check`;
- ``judged``: `seqjudge judge`'s engine-beside-judge views;
- ``summary``: `seqjudge run`'s summary and `--dry-run` estimate; ``batches``: batch runs;
- ``listings``: the stored runs, baselines and review queue, one run, one trace, one review item;
- ``comparison``: `seqjudge compare` and `seqjudge report-ci`, and the CI files both write;
- ``datasets``: `seqjudge golden validate`; ``calibration``: `seqjudge calibrate`'s report;
  ``calibrate_plot``: its PNG;
- ``textview``: the plain-text pieces they share (the FAIL block, the numbered call list, totals);
- ``ci_outputs``: JUnit XML, GitHub annotations and job summaries, pull-request markdown;
- ``alerts``: webhook alerts;
- ``html/``: the self-contained HTML report of a run.

Adding a format: one module here and one line in ``registry.FORMATS``.
"""
