"""Static analysis of a change: every analyzer that reads a file's language, and secrets
scanners on every file, as reviewer evidence.

The analyzers (``tools``, one module each): ruff and bandit (Python); semgrep with our own
rules in ``semgrep_rules/`` (JavaScript, TypeScript, Go, Java, shell, PHP, Ruby, C#, Kotlin,
and taint rules for Python and JavaScript web code); oxlint (JavaScript,
TypeScript); shellcheck (shell); hadolint (Dockerfiles); detect-secrets (every file). Each is
optional at run time: a missing, failing, slow or turned-off tool is an error in the report
and a reason in each of its files' ``not_run``.

The code under review is untrusted. It is never imported or executed: each input is written
to a fresh temporary directory under a generated name (``f0.py``, ``f1.ts``, ...; never the
path from the change, only a short alphanumeric extension of it) and the tools read those
files as subprocesses (argument lists, no shell, one deadline, no configuration file of the
change). The only in-process use of the text is ``ast.parse`` (parsing, not compiling or
running) to choose how to cut Python diff fragments.

The modules, in the order the work goes:

* ``inputs``: what is analyzed (:class:`AnalyzerInput`, built from the diff parser's files)
  and its kind (``kind_of``: by extension, ``Dockerfile``, or a shell shebang).
* ``fragments``: the files written for the tools; a Python file known only by its diff hunks
  is made to parse hunk by hunk (see there); other languages' tools parse with recovery.
* ``runner``: one process per tool, concurrently (:func:`run_analyzers`).
* ``tools``: the registry and each tool's command and parser (with its grading table).
* ``evidence``: ruff's and bandit's JSON turned into evidence items. Results on a fragment's
  synthetic lines, syntax errors, and rules that only make sense with the whole file
  (undefined or unused names, import position, ``return`` outside a function, ...) are
  dropped for fragments: they are artefacts of cutting the file.
* ``rules``: ruff's and bandit's rule selection and the category and severity of each rule.
* ``fixes``: a concrete fix text for each finding (:func:`suggestion_for`).

``# noqa``, ``# nosec`` and ``pragma: allowlist secret`` comments are ignored
(``rules.IGNORE_SUPPRESSIONS``): a suppression comment is itself part of the untrusted
change, and reviewers should see what it hides.
"""

from .fixes import for_category, suggestion_for
from .inputs import AnalyzerInput, input_from_file
from .runner import AnalyzerReport, run_analyzers

__all__ = ["AnalyzerInput", "AnalyzerReport", "for_category", "input_from_file",
           "run_analyzers", "suggestion_for"]
