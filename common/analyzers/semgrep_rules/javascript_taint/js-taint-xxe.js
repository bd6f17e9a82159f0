const express = require("express");
const libxmljs = require("libxmljs");

const app = express();
app.use(express.text({ type: "application/xml" }));

app.post("/import", (req, res) => {
  // ruleid: js-taint-xxe
  const doc = libxmljs.parseXml(req.body, { noent: true });
  res.json({ root: doc.root().name() });
});

app.post("/import-safe", (req, res) => {
  // ok: js-taint-xxe
  const doc = libxmljs.parseXml(req.body);
  // ok: js-taint-xxe
  const local = libxmljs.parseXml("<a/>", { noent: true });
  res.json({ root: doc.root().name(), local: local.root().name() });
});
