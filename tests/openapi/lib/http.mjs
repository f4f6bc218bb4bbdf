// http.mjs: raw HTTP against the server under test (node:http, no automatic decompression,
// so Content-Encoding and the bytes on the wire are what the tests see).
import http from 'node:http';

export const BASE = process.env.FP_BASE_URL;
if (!BASE) throw new Error('FP_BASE_URL is not set: run tests/openapi/run.sh SERVER_BINARY');

/**
 * request('GET', '/api/v1/sessions', {headers, body, chunks}) -> {status, headers, raw, text}
 * body: Buffer or string, sent with Content-Length. chunks: an array of Buffers sent with
 * Transfer-Encoding: chunked (no Content-Length). base: another server (default FP_BASE_URL).
 */
export function request(method, path, { headers = {}, body = null, chunks = null, timeoutMs = 20000, base = BASE } = {}) {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const h = { ...headers };
    if (body != null) h['Content-Length'] = Buffer.byteLength(body);
    const req = http.request(url, { method, headers: h, agent: false }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('error', reject);
      res.on('end', () => {
        const raw = Buffer.concat(parts);
        resolve({ status: res.statusCode, headers: res.headers, raw, text: raw.toString('utf8'), complete: res.complete });
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path}: no reply in ${timeoutMs} ms`)));
    req.on('error', reject);
    if (chunks) for (const c of chunks) req.write(c);
    else if (body != null) req.write(body);
    req.end();
  });
}

/**
 * Starts an upload and leaves it open: headers and a first piece of the body are sent, the
 * rest never is. Resolves once the bytes are written; .reply resolves if the server answers
 * early (e.g. 503); .abort() drops the connection.
 */
export function openUpload(path, declaredLength, firstBytes, headers = {}) {
  const url = new URL(path, BASE);
  const req = http.request(url, { method: 'POST', headers: { ...headers, 'Content-Length': declaredLength }, agent: false });
  const reply = new Promise((resolve) => {
    req.on('response', (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, raw: Buffer.concat(parts) }));
      res.on('error', () => resolve(null));
    });
    req.on('error', () => resolve(null));
  });
  req.flushHeaders();
  req.write(firstBytes);
  return { reply, abort: () => req.destroy() };
}
