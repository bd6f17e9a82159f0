"""Fixes proven before they are offered (issue 16): a finding's suggestion turned into a patch,
checked against the file and, when the server allows, the tests; and "Apply accepted fixes", a
run that commits them on a branch and stops at the merge-request gate."""
