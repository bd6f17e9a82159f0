"""Seed 003's quality stages on the review's findings, without Django: the written severity
rubric and the kinds (``rubric``), the verifier's prompt and answer (``prompt``), applying its
answers with a trail in each finding's ``quality`` (``apply``), clustering repeats across
lines and files (``cluster``), the offline stand-in (``offline``) and the per-stage counts the
review page shows (``summary``). The stage itself is ``pattern/verify.py``."""
