const express = require("express");
const fs = require("fs");
const path = require("path");

const app = express();
const router = express.Router();

app.get("/report", (req, res) => {
  // ruleid: js-taint-path-traversal
  res.sendFile(path.join(__dirname, "reports", req.query.name));
});

app.get("/raw/:doc", (req, res) => {
  const file = path.join("/srv/docs", req.params.doc);
  // ruleid: js-taint-path-traversal
  fs.readFile(file, "utf8", (err, text) => res.type("text").send(text));
});

app.get("/safe", (req, res) => {
  // ok: js-taint-path-traversal
  res.sendFile(path.join(__dirname, "reports", path.basename(req.query.name)));
});

app.get("/rooted", (req, res) => {
  // ok: js-taint-path-traversal
  res.sendFile(req.query.name, { root: path.join(__dirname, "reports") });
  // ok: js-taint-path-traversal
  res.sendFile(path.join(__dirname, "public", "index.html"));
});

router.get("/anywhere", (req, res) => {
  // a root of "/" confines nothing
  // ruleid: js-taint-path-traversal
  res.sendFile(req.query.file, { root: "/" });
  // ruleid: js-taint-path-traversal
  res.download(req.query.file, "report.csv", { root: '/' });
});
