const express = require("express");
const escapeHtml = require("escape-html");

const app = express();

app.get("/hello", (req, res) => {
  // ruleid: js-taint-xss
  res.send(`<h1>Hello ${req.query.name}</h1>`);
});

app.get("/search", (req, res) => {
  const q = req.query.q;
  // ruleid: js-taint-xss
  res.status(200).send("<p>No results for " + q + "</p>");
});

app.get("/safe", (req, res) => {
  // ok: js-taint-xss
  res.send(`<h1>Hello ${escapeHtml(req.query.name)}</h1>`);
  // ok: js-taint-xss
  res.json({ name: req.query.name });
});

app.get("/page", (req, res) => {
  // ok: js-taint-xss
  res.render("page", { name: req.query.name });
});
