"""Using the evidence: a concrete fix text for each finding, and the findings of one category."""

from __future__ import annotations

import re

from ..secret_keys import mask
from .rules import is_bugbear, rule_parts

# Fix texts say what to change in this code. ``{at}`` becomes "on line N" (or "here"), and
# ``{ name}`` the name the analyzer's message quotes (" `os`"), or nothing.
_SECURITY_FIXES = {
    "608": "Pass the values {at} as query parameters (cursor.execute(sql, params)) instead "
           "of formatting them into the SQL string.",
    "611": "Pass the values {at} as query parameters to RawSQL instead of formatting them "
           "into the SQL string.",
    "610": "Replace the QuerySet.extra() call {at} with ORM expressions, or pass the values "
           "as params.",
    "602": "Pass the command {at} as a list of arguments and drop shell=True (shell=False is "
           "the default); never build a shell command from input.",
    "604": "Pass the command {at} as a list of arguments and drop shell=True (shell=False is "
           "the default); never build a shell command from input.",
    "605": "Replace the os.system/os.popen call {at} with subprocess.run([...]) and a list "
           "of arguments (no shell=True).",
    "603": "Check that no argument of the subprocess call {at} comes unvalidated from "
           "untrusted input; keep the argument list fixed where you can.",
    "607": "Start the program {at} by its absolute path (or resolve it once with "
           "shutil.which and check it) instead of relying on PATH.",
    "307": "Replace eval() {at} with ast.literal_eval for literals, or parse the input "
           "explicitly.",
    "102": "Remove the exec() call {at}: dispatch to explicit functions (e.g. a dict of "
           "callables) instead of executing code strings.",
    "105": "Take the password{ name} {at} out of the source: read it from the environment "
           "or a secrets store, and change it, since it is in the history now.",
    "106": "Take the password passed {at} out of the source: read it from the environment "
           "or a secrets store, and change it, since it is in the history now.",
    "107": "Remove the default password of the argument {at}: make it required, or read it "
           "from the environment or a secrets store.",
    "301": "Do not unpickle data that could come from outside {at}; use json (or a signed, "
           "schema-checked format) instead of pickle.",
    "302": "Do not unmarshal data that could come from outside {at}; use json instead of "
           "marshal.",
    "403": "Avoid pickle {at} for data that crosses a trust boundary; use json or a signed "
           "format.",
    "506": "Replace yaml.load {at} with yaml.safe_load (or yaml.load(..., "
           "Loader=yaml.SafeLoader)).",
    "324": "Use hashlib.sha256 (or stronger) {at} if the hash protects anything; for a "
           "plain checksum pass usedforsecurity=False.",
    "303": "Use hashlib.sha256 (or stronger) {at} if the hash protects anything; for a "
           "plain checksum pass usedforsecurity=False.",
    "304": "Replace the cipher {at} with an authenticated modern one (AES-GCM or "
           "ChaCha20-Poly1305 from cryptography).",
    "305": "Replace ECB mode {at} with an authenticated mode (AES-GCM).",
    "311": "Use the secrets module (secrets.token_hex, secrets.choice) {at} if the value is "
           "a token, password or anything security-related.",
    "101": "Replace the assert {at} with an explicit check that raises, if it must hold at "
           "run time; Python drops asserts under -O.",
    "110": "Handle or log the exception {at} (logger.exception) instead of passing, and "
           "catch only the specific exception type you expect.",
    "112": "Handle or log the exception {at} before continuing, and catch only the "
           "specific exception type you expect.",
    "113": "Pass a timeout= to the HTTP request {at} so a slow server cannot hang the "
           "worker.",
    "104": "Bind {at} to a specific interface (e.g. 127.0.0.1) or make the address "
           "configurable instead of 0.0.0.0.",
    "108": "Create the temporary file {at} with the tempfile module instead of a fixed /tmp "
           "path.",
    "501": "Keep TLS certificate verification on {at} (verify=True); point verify at a CA "
           "bundle if the certificate is private.",
    "310": "Check the URL's scheme (http/https only) before opening it {at}, or use an HTTP "
           "client that only speaks HTTP.",
    "308": "Do not mark the string {at} as safe while it contains input; build the HTML "
           "with format_html or escape the values.",
    "701": "Create the Jinja2 Environment {at} with autoescape=True (or "
           "select_autoescape()).",
    "202": "Extract the archive {at} with filter='data' (tarfile) or check each member's "
           "path before extracting.",
    "404": "Check that the subprocess calls in this module use fixed argument lists and no "
           "shell.",
}
for _n in range(313, 321):
    _SECURITY_FIXES.setdefault(str(_n), "Parse the XML {at} with defusedxml instead of the "
                                        "standard library parsers.")

_FIXES = {
    "E999": "Fix the syntax error {at}; the file cannot be imported as it is.",
    "E711": "Compare with None {at} using `is`/`is not`.",
    "E712": "Test the truth value directly {at} (`if x:` / `if not x:`), or use `is True`/"
            "`is False` if the identity matters.",
    "E713": "Write `x not in y` instead of `not x in y` {at}.",
    "E714": "Write `x is not y` instead of `not x is y` {at}.",
    "E721": "Use isinstance() (or `is` for exact type checks) {at} instead of comparing "
            "types with ==.",
    "E722": "Catch a specific exception type {at} instead of a bare `except:`.",
    "E731": "Define the function{ name} {at} with def instead of assigning a lambda.",
    "E741": "Rename{ name} {at} to something that cannot be confused with 1 or 0.",
    "E101": "Indent line {line} with spaces only, like the lines around it.",
    "W191": "Indent line {line} with spaces instead of tabs (your editor or `ruff format` "
            "can convert the file).",
    "E501": "Break line {line} into shorter lines.",
    "W605": "Make the string {at} a raw string (r'...') or escape the backslash.",
    "B006": "Replace the mutable default argument {at} with None and create the list/dict "
            "inside the function.",
    "B008": "Replace the function call in the default argument {at} with None and call it "
            "inside the function.",
    "B007": "Rename the unused loop variable{ name} {at} to `_`.",
    "B023": "Bind the loop variable{ name} {at} as a default argument (or use "
            "functools.partial) instead of closing over it.",
    "B904": "Chain the exception raised {at}: `raise NewError(...) from err` (or `from "
            "None`).",
    "B905": "Pass strict=True (or strict=False deliberately) to the zip() call {at}.",
    "B017": "Assert a specific exception type {at}, not Exception.",
    "B018": "Remove the useless expression {at}, or assign or return its value.",
    "BLE001": "Catch the specific exceptions you expect {at} instead of Exception; let "
              "others propagate.",
    "TRY002": "Raise a specific (or custom) exception class {at} instead of a bare "
              "Exception.",
    "TRY300": "Move the statement {at} out of the try body into an else: block.",
    "TRY301": "Move the raise {at} out of the try body (into a helper or after the try).",
    "TRY400": "Use logger.exception(...) {at} to keep the traceback.",
    "TRY201": "Re-raise with a bare `raise` {at}.",
    "C901": "Split the function{ name} {at} into smaller functions; it is too complex to "
            "review and test.",
    "F541": "Remove the `f` prefix from the string {at}; it has no placeholders.",
    "F632": "Use == to compare with the str, bytes or int literal {at}, not `is`.",
    "F821": "Define or import{ name} before it is used {at}.",
    "F841": "Remove the assignment to the unused variable{ name} {at}, or use its value.",
    "F401": "Remove the unused import{ name} {at} (or re-export it in __all__ if it is "
            "public API).",
    "F811": "Remove or rename the redefinition of{ name} {at}.",
    "SIM105": "Replace the try/except/pass {at} with contextlib.suppress(...).",
    "SIM108": "Write the if/else assignment {at} as a conditional expression.",
    "SIM102": "Combine the nested if statements {at} with `and`.",
    "SIM117": "Combine the nested with statements {at} into one.",
    "SIM118": "Write `key in d` instead of `key in d.keys()` {at}.",
}
_PREFIX_FIXES = {
    "N": "Rename{ name} {at} to follow PEP 8 naming (snake_case functions and variables, "
         "CapWords classes, UPPER_CASE constants).",
    "UP": "Rewrite the code {at} in the modern syntax the analyzer points to (`ruff check "
          "--fix --select UP` does it).",
}
_QUOTED = re.compile(r"`([^`]{1,80})`")


def _fill(template: str, evidence: dict) -> str:
    line = evidence.get("line")
    names = _QUOTED.findall(str(evidence.get("message") or ""))
    text = (template.replace("{at}", f"on line {line}" if line else "here")
            .replace("{line}", str(line) if line else "this")
            .replace("{ name}", f" `{names[0]}`" if names else ""))
    return mask(text)


def suggestion_for(evidence: dict) -> str:
    """A concrete instruction for what to change in this code; never empty, never only the
    rule's name."""
    rule = str(evidence.get("rule") or "").strip()
    prefix, num = rule_parts(rule)
    if evidence.get("fix") and evidence.get("tool") == "secrets":
        return mask(str(evidence["fix"]))
    found = None
    if prefix == "S" or (prefix == "B" and not is_bugbear(rule)):  # ruff S123 = bandit B123
        found = _SECURITY_FIXES.get(num)
    if found is None:
        found = _FIXES.get(rule)
    if found is None and evidence.get("tool_fix"):
        # ruff's own fix title ("Remove unused import: `os`") names the change.
        line = evidence.get("line")
        return mask(f"{str(evidence['tool_fix']).rstrip('.')}"
                    f"{f' on line {line}' if line else ''}.")
    if found is None:
        found = _PREFIX_FIXES.get(prefix)
    if found is None:
        message = str(evidence.get("message") or "").strip().rstrip(".")
        if not message:
            return "Read the analyzer's report for this line and change the code it points to."
        line = evidence.get("line")
        return mask(f"Change the code {f'on line {line}' if line else 'here'} so that this no "
                    f"longer holds: {message}.")
    return _fill(found, evidence)


def for_category(evidence: list[dict], category: str) -> list[dict]:
    """The evidence items of one category (security, architecture or style)."""
    return [e for e in evidence if e.get("category") == category]
