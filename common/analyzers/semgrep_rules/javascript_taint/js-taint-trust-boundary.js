const express = require("express");

const app = express();
const ALLOWED_LANGUAGES = ["en", "fr", "de"];

app.post("/prefs", (req, res) => {
  // ruleid: js-taint-trust-boundary
  req.session.role = req.body.role;
  const lang = req.body.lang;
  if (ALLOWED_LANGUAGES.includes(lang)) {
    // ok: js-taint-trust-boundary
    req.session.lang = lang;
  }
  // ok: js-taint-trust-boundary
  req.session.visits = (req.session.visits || 0) + 1;
  // ruleid: js-taint-trust-boundary
  req.session["userId"] = req.query.uid;
  res.sendStatus(204);
});
