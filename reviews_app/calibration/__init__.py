"""Reviewer calibration (issue 34): run the code review on changes whose defects are known,
and say per reviewer role and model what it finds, what it invents and what it costs.

* ``cases``: a calibration set (the starter set in ``starter/``, a folder like it, or a JSONL
  file), loaded and checked case by case; no Django.
* ``scoring``: matching findings to defects and the scorecard's figures; no Django.
* ``runner``: each case reviewed as a real review of the owner (the path a pasted diff
  takes), the calibration runs recognised again by their ``options["calibration"]``, and
  the scorecard read back from them, with the precision of the owner's own triage.
* ``report``: the scorecard as the table ``manage.py calibrate`` and the benchmark print.
"""
