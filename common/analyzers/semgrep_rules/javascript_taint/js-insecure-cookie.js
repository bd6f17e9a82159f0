const express = require("express");
const session = require("express-session");

const app = express();
// ruleid: js-insecure-cookie
app.use(session({ secret: process.env.SESSION_SECRET, cookie: { secure: false } }));

app.post("/login", (req, res) => {
  // ruleid: js-insecure-cookie
  res.cookie("auth_token", issueToken(req.body.user));
  // ruleid: js-insecure-cookie
  res.cookie("sid", issueToken(req.body.user), { httpOnly: true });
  // ok: js-insecure-cookie
  res.cookie("sid", issueToken(req.body.user), { secure: true, httpOnly: true, sameSite: "lax" });
  // ok: js-insecure-cookie
  res.cookie("theme", "dark");
  res.sendStatus(204);
});
