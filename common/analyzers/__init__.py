"""Static analysis of a change's Python files: ruff and bandit results as reviewer evidence.

The code under review is untrusted. It is never imported or executed: each input is written
to a fresh temporary directory under a generated name (``f0.py``, ``f1.py``, ...; never the
path from the change) and ruff and bandit read those files as subprocesses (argument lists,
no shell, one deadline). The only in-process use of the text is ``ast.parse`` (parsing, not
compiling or running) to choose how to cut diff fragments.

The modules, in the order the work goes:

* ``inputs``: what is analyzed (:class:`AnalyzerInput`, built from the diff parser's files).
* ``fragments``: the files written for the tools; a file known only by its diff hunks is
  made to parse hunk by hunk (see there).
* ``runner``: one ruff and one bandit process, concurrently (:func:`run_analyzers`).
* ``evidence``: their JSON turned into evidence items. Results on a fragment's synthetic
  lines, syntax errors, and rules that only make sense with the whole file (undefined or
  unused names, import position, ``return`` outside a function, ...) are dropped for
  fragments: they are artefacts of cutting the file.
* ``rules``: the rule selection and the category and severity of each rule.
* ``fixes``: a concrete fix text for each finding (:func:`suggestion_for`).

``# noqa`` and ``# nosec`` comments are ignored (``rules.IGNORE_SUPPRESSIONS``): a suppression
comment is itself part of the untrusted change, and reviewers should see what it hides.
"""

from .fixes import for_category, suggestion_for
from .inputs import AnalyzerInput, input_from_file
from .runner import AnalyzerReport, run_analyzers

__all__ = ["AnalyzerInput", "AnalyzerReport", "for_category", "input_from_file",
           "run_analyzers", "suggestion_for"]
