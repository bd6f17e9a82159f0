"""Publishing a review to its pull request, with a person in between (issue 15).

- ``policy``: which policy applies (the connection's, unless ``.quorum.toml`` says) and which
  findings go out;
- ``dispatch``: creating a ``Publication`` (once per review, triage version and trigger) and
  sending the task; the hooks ``after_final`` (triage) and ``after_synthesis`` (automatic);
  the "Publish now" button's ``publish_now``;
- ``worker``: the task's work (claim, post, summary, retries);
- ``content``: the review's rows as what ``hosting.render`` writes;
- ``views``: the button, and the panel's context.
"""
