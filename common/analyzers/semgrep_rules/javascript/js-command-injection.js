const cp = require("child_process");
const { execSync } = require("child_process");

function run(req, res) {
  // ruleid: js-command-injection
  cp.exec("ls " + req.query.dir, (err, out) => res.send(out));
  // ruleid: js-command-injection
  execSync(`git log ${req.body.ref}`);
  // ok: js-command-injection
  cp.exec("ls -la", (err, out) => res.send(out));
  // ok: js-command-injection
  cp.execFile("git", ["log", req.body.ref]);
  // ok: js-command-injection
  const m = /a(b)/.exec(req.query.s);
  return m;
}
