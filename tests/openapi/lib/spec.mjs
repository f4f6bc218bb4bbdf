// spec.mjs: api/openapi.yaml loaded once, its schemas compiled with ajv (JSON Schema 2020-12),
// and validateResponse(), which checks one real reply (status, headers, media type, body)
// against what the document says for that path and method. Every check that passed is
// recorded, so a test can assert that every documented response was exercised.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import YAML from 'yaml';

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = process.env.FP_REPO || join(here, '..', '..', '..');
export const specPath = join(repoRoot, 'api', 'openapi.yaml');
export const specText = readFileSync(specPath, 'utf8');
export const spec = YAML.parse(specText);

export const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const ROOT_ID = 'https://firstpass.invalid/openapi.yaml';

/** OpenAPI's numeric formats, which ajv-formats does not know. */
export function addOpenApiFormats(ajv) {
  const int = (lo, hi) => ({ type: 'number', validate: (n) => Number.isInteger(n) && n >= lo && n <= hi });
  ajv.addFormat('int32', int(-(2 ** 31), 2 ** 31 - 1));
  ajv.addFormat('int64', int(-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
  ajv.addFormat('float', { type: 'number', validate: Number.isFinite });
  ajv.addFormat('double', { type: 'number', validate: Number.isFinite });
  return ajv;
}

export function newAjv(opts = {}) {
  // strictSchema catches misspelt keywords in the document; strictTypes/strictRequired would
  // reject legal fragments such as `allOf: [{properties: ...}]` without a type.
  const ajv = new Ajv2020({ allErrors: true, inlineRefs: false, strict: true, strictTypes: false, strictRequired: false, strictTuples: false, ...opts });
  addFormats(ajv);
  return addOpenApiFormats(ajv);
}

/** Resolves an internal "#/a/b" reference of the document. */
export function resolvePointer(ref) {
  if (!ref.startsWith('#/')) throw new Error(`only internal references are used: ${ref}`);
  let node = spec;
  for (const raw of ref.slice(2).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (node == null || !(key in node)) throw new Error(`unresolved $ref ${ref}`);
    node = node[key];
  }
  return node;
}
export const deref = (o) => (o && o.$ref ? deref(resolvePointer(o.$ref)) : o);

// components.schemas become $defs of one registered root schema; references are rewritten to it.
function rewriteRefs(node) {
  if (Array.isArray(node)) return node.map(rewriteRefs);
  if (node && typeof node === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') {
        const m = /^#\/components\/schemas\/(.+)$/.exec(v);
        if (!m) throw new Error(`schema $ref outside components/schemas: ${v}`);
        out.$ref = `${ROOT_ID}#/$defs/${m[1]}`;
      } else out[k] = rewriteRefs(v);
    }
    return out;
  }
  return node;
}

export const ajv = newAjv();
ajv.addSchema({ $id: ROOT_ID, $defs: rewriteRefs(spec.components?.schemas ?? {}) });
const compiled = new Map();
export function compile(schema, where) {
  if (!compiled.has(where)) {
    try {
      compiled.set(where, ajv.compile(rewriteRefs(schema)));
    } catch (e) {
      throw new Error(`${where}: the schema does not compile: ${e.message}`);
    }
  }
  return compiled.get(where);
}

// ---- coverage ----
export const seen = new Set();
const key = (method, template, status, ctype) => `${method.toUpperCase()} ${template} ${status}${ctype ? ' ' + ctype : ''}`;

/** Every (method, path, status, media type) the document promises, 5xx faults excepted. */
export function documentedResponses() {
  const out = [];
  for (const [template, item] of Object.entries(spec.paths)) {
    for (const m of METHODS) {
      if (!item[m]) continue;
      for (const [status, r0] of Object.entries(item[m].responses)) {
        // a server fault cannot be provoked from outside, nor a full disk here (507 is
        // tests/reliability/hostile.sh case_diskfull's: a tmpfs in a mount namespace)
        if (status === '500' || status === '507') continue;
        // nor can a database outage here (SQLite); tests/pg/test_outage.py provokes it on PostgreSQL
        if (status === '503' && (template === '/healthz' || template === '/readyz')) continue;
        if (r0.$ref === '#/components/responses/DatabaseUnreachable') continue;
        const r = deref(r0);
        const types = Object.keys(r.content ?? {});
        if (!types.length) out.push(key(m, template, status));
        for (const t of types) out.push(key(m, template, status, t));
      }
    }
    out.push(`* ${template} 405`);
  }
  return out;
}

// ---- matching a request to the document ----
export function templateOf(path) {
  const p = path.split('?')[0];
  for (const template of Object.keys(spec.paths)) {
    const re = new RegExp('^' + template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+') + '/?$');
    if (re.test(p)) return template;
  }
  return null;
}
export const methodsOf = (template) => METHODS.filter((m) => spec.paths[template][m]).map((m) => m.toUpperCase());

function fail(ctx, msg) {
  const err = new Error(`${ctx}: ${msg}`);
  err.ctx = ctx;
  throw err;
}
function errorsText(v) {
  return (v.errors || []).slice(0, 8).map((e) => `${e.instancePath || '/'} ${e.message}${e.params ? ' ' + JSON.stringify(e.params) : ''}`).join('; ');
}

/**
 * Checks one reply against the document: the status must be documented for the operation
 * (an undocumented method must get 405 with Allow = the path's methods; an unknown path
 * NoRoute), each required header must be there and valid, the media type must be one the
 * response lists, and the body must validate against that media type's schema. gzip bodies
 * (Content-Encoding: gzip) are inflated first. Returns the parsed body.
 */
export function validateResponse(method, path, res) {
  method = method.toUpperCase();
  const ctx = `${method} ${path} -> ${res.status}`;
  const template = templateOf(path);
  const opMethod = method === 'HEAD' ? 'GET' : method;
  let response;
  let opKey = null; // the coverage key of an operation's response, once its media type is known
  if (!template) {
    if (res.status !== 404) fail(ctx, 'a path the document does not list must be 404');
    response = deref(spec.components.responses.NoRoute);
  } else {
    const op = spec.paths[template][opMethod.toLowerCase()];
    if (!op) {
      if (res.status !== 405) fail(ctx, `${method} is not an operation of ${template}: expected 405`);
      response = deref(spec.components.responses.MethodNotAllowed);
      const allow = (res.headers.allow || '').split(',').map((s) => s.trim()).filter(Boolean).sort();
      const want = methodsOf(template).sort();
      if (JSON.stringify(allow) !== JSON.stringify(want)) fail(ctx, `Allow is '${res.headers.allow}', the document lists ${want.join(', ')}`);
      seen.add(`* ${template} 405`);
    } else {
      const r0 = op.responses[String(res.status)];
      if (!r0) fail(ctx, `status ${res.status} is not documented for ${opMethod} ${template} (documented: ${Object.keys(op.responses).join(', ')}); body: ${res.text.slice(0, 300)}`);
      response = deref(r0);
      opKey = (ctype) => key(opMethod, template, res.status, ctype);
    }
  }
  for (const [name, h0] of Object.entries(response.headers ?? {})) {
    const h = deref(h0);
    const v = res.headers[name.toLowerCase()];
    if (v === undefined) {
      if (h.required) fail(ctx, `required header ${name} is missing`);
      continue;
    }
    const val = compile(h.schema, `${template ?? "no-route"} ${res.status} header ${name}`);
    if (!val(v)) fail(ctx, `header ${name}: '${v}': ${errorsText(val)}`);
  }
  const content = response.content ?? {};
  const raw = res.headers['content-encoding'] === 'gzip' ? gunzipSync(res.raw) : res.raw;
  if (!Object.keys(content).length) {
    if (opKey) seen.add(opKey());
    if (raw.length && method !== 'HEAD') fail(ctx, `the response documents no body, got ${raw.length} bytes`);
    return undefined;
  }
  const ctype = (res.headers['content-type'] || '').split(';')[0].trim().toLowerCase();
  const media = content[ctype];
  if (!media) fail(ctx, `Content-Type '${res.headers['content-type']}' is not one of ${Object.keys(content).join(', ')}`);
  // Exercised, whether or not the body turns out valid: validity is reported below.
  if (opKey) seen.add(opKey(ctype));
  const text = raw.toString('utf8');
  let body = text;
  if (ctype === 'application/json') {
    try {
      body = JSON.parse(text);
    } catch (e) {
      fail(ctx, `the body is not valid JSON (${e.message}); it ends with: ${JSON.stringify(text.slice(-120))}`);
    }
  }
  if (media.schema) {
    const val = compile(media.schema, `${opMethod} ${template ?? 'no-route'} ${res.status} ${ctype}`);
    if (!val(body)) fail(ctx, `the ${ctype} body does not match the document: ${errorsText(val)}`);
  }
  return body;
}
