const express = require("express");
const axios = require("axios");

const app = express();
const ALLOWED_HOSTS = new Set(["api.example.com"]);

app.get("/preview", async (req, res) => {
  // ruleid: js-taint-ssrf
  const page = await axios.get(req.query.url);
  res.json({ length: page.data.length });
});

app.post("/hook", async (req, res) => {
  const target = `http://${req.body.host}/health`;
  // ruleid: js-taint-ssrf
  const r = await fetch(target);
  res.json({ status: r.status });
});

app.get("/allowed", async (req, res) => {
  const url = new URL(req.query.url);
  if (ALLOWED_HOSTS.has(url.hostname)) {
    // ok: js-taint-ssrf
    const page = await axios.get(url.href);
    return res.json({ length: page.data.length });
  }
  // ok: js-taint-ssrf
  const hits = await axios.get("https://api.example.com/search?q=" + encodeURIComponent(req.query.q));
  res.json(hits.data);
});
