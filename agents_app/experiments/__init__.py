"""Experiments (issue 34): datasets of tasks run over a grid of patterns, model assignments
and repetitions, scored by evaluators and reported with intervals. The modules here that do
not touch the database (``stats``, ``evaluators``, ``spec``, ``charts``) import no Django."""
