const express = require("express");
const xpath = require("xpath");

const app = express();

app.get("/user", (req, res) => {
  // ruleid: js-taint-xpath-injection
  const nodes = xpath.select(`//user[@name='${req.query.name}']`, usersDoc);
  res.json({ count: nodes.length });
});

app.get("/user-safe", (req, res) => {
  // ok: js-taint-xpath-injection
  const nodes = xpath.parse("//user[@name=$name]").select({ node: usersDoc, variables: { name: req.query.name } });
  // ok: js-taint-xpath-injection
  const admins = xpath.select("//user[@role='admin']", usersDoc);
  res.json({ count: nodes.length + admins.length });
});
