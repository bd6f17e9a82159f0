const express = require("express");

const app = express();
const TRUSTED_HOSTS = ["app.example.com"];

app.get("/login/done", (req, res) => {
  const next = req.query.next || "/";
  // ruleid: js-taint-open-redirect
  res.redirect(next);
});

app.get("/back", (req, res) => {
  const target = new URL(req.get("Referer"));
  if (TRUSTED_HOSTS.includes(target.hostname)) {
    // ok: js-taint-open-redirect
    return res.redirect(target.href);
  }
  // ok: js-taint-open-redirect
  res.redirect("/profile?tab=" + encodeURIComponent(req.query.tab));
});
