import https from "https";

export function agent(ca: string) {
  // ruleid: js-tls-disabled
  const insecure = new https.Agent({ keepAlive: true, rejectUnauthorized: false });
  // ruleid: js-tls-disabled
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
  // ok: js-tls-disabled
  const safe = new https.Agent({ keepAlive: true, rejectUnauthorized: true, ca });
  // ok: js-tls-disabled
  const other = new https.Agent({ keepAlive: true });
  return [insecure, safe, other];
}
