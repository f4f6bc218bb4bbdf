// api.test.mjs: calls every operation of api/openapi.yaml on a running firstpass-server
// (FP_BASE_URL, started by run.sh with --max-upload FP_MAX_UPLOAD and --max-uploads
// FP_MAX_UPLOADS) with real traces (FP_TRACES), including each documented error, and
// validates every reply (status, headers, media type, body) against the document. The last
// test fails if a documented response (5xx faults aside) was never exercised.
//
// The tests run in file order and share state (the sessions uploaded first).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { request, openUpload } from './lib/http.mjs';
import { validateResponse, documentedResponses, seen } from './lib/spec.mjs';

const TRACES = process.env.FP_TRACES;
const MAX_UPLOAD = Number(process.env.FP_MAX_UPLOAD || 1 << 20);
const MAX_UPLOADS = Number(process.env.FP_MAX_UPLOADS || 2);
assert.ok(TRACES, 'FP_TRACES is not set');
const trace = (rel) => readFileSync(join(TRACES, rel));
const FILES = {
  simpleAdd: 'hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz',
  base: 'hta/trace_compare/base/base.json.gz',
  test: 'hta/trace_compare/test/test.json.gz',
  cpuOnly: 'hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz',
  nccl: 'hta/nccl_parser_config/nccl_data.json.gz', // tracks with > 2,000 events: bucket mode
};

/** One call, validated against the document; asserts the status when given. */
async function call(method, path, opts = {}, status = undefined) {
  const res = await request(method, path, opts);
  const body = validateResponse(method, path, res);
  if (status !== undefined) assert.equal(res.status, status, `${method} ${path}: ${res.status} ${res.text.slice(0, 300)}`);
  return { res, body };
}
async function expectError(method, path, opts, status, code) {
  const { res, body } = await call(method, path, opts, status);
  assert.equal(body.error.code, code, `${method} ${path}: error ${JSON.stringify(body.error)}`);
  return res;
}
const ids = {}; // name -> session id
const events = {}; // name -> events the upload reply counted

/** RFC 4180, enough for the server's CSV: rows of fields. */
function parseCsv(text) {
  const rows = [];
  let row = [], f = '', q = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (q) {
      if (c === '"' && text[i + 1] === '"') { f += '"'; i++; }
      else if (c === '"') q = false;
      else f += c;
    } else if (c === '"') q = true;
    else if (c === ',') { row.push(f); f = ''; }
    else if (c === '\n') { row.push(f); rows.push(row); row = []; f = ''; }
    else f += c;
  }
  assert.ok(!q && f === '' && row.length === 0, 'the CSV ends inside a record');
  return rows;
}
function assertCsvMatches(text, rows, cols) {
  const csv = parseCsv(text);
  assert.deepEqual(csv[0], cols);
  assert.equal(csv.length - 1, rows.length, 'CSV data rows = JSON rows');
  const at = cols.indexOf('name');
  csv.slice(1).forEach((r, i) => assert.equal(r[at], rows[i].name, `CSV row ${i + 1} is JSON row ${i}`));
}
const textLines = (t) => t.split('\n').filter((l) => l.length);

// ---------------------------------------------------------------- health

test('GET /healthz', async () => {
  const { body } = await call('GET', '/healthz', {}, 200);
  assert.equal(body.status, 'ok');
  await call('POST', '/healthz', {}, 405);
});

test('GET /livez and /readyz: the process and its build, the database', async () => {
  const live = (await call('GET', '/livez', {}, 200)).body;
  assert.equal(live.version, '0.1.0');
  const ready = (await call('GET', '/readyz', {}, 200)).body;
  assert.deepEqual(ready, (await call('GET', '/healthz', {}, 200)).body);
  await call('POST', '/livez', {}, 405);
  await call('POST', '/readyz', {}, 405);
});

// ---------------------------------------------------------------- uploads

async function upload(name, path, opts) {
  const { res, body } = await call('POST', path, opts, 201);
  assert.equal(res.headers.location, body.url);
  assert.equal(body.url, `/api/v1/sessions/${body.id}`);
  ids[name] = body.id;
  events[name] = body.events;
  return body;
}

test('POST /api/v1/sessions: gzip sniffed from the magic bytes, with a name and labels', async () => {
  const b = await upload('simpleAdd', '/api/v1/sessions?name=simple%20add&label=model:alexnet&label=run:1&label=job:oa-job&label=rank:0', { body: trace(FILES.simpleAdd) });
  assert.ok(b.events > 1000);
});

test('POST /api/v1/sessions: plain JSON and Content-Encoding: gzip', async () => {
  await upload('base', '/api/v1/sessions?name=base&label=pair:cmp&label=side:base', {
    body: gunzipSync(trace(FILES.base)),
    headers: { 'Content-Type': 'application/json' },
  });
  await upload('test', '/api/v1/sessions?name=test&label=pair:cmp&label=side:test', {
    body: trace(FILES.test),
    headers: { 'Content-Encoding': 'gzip', 'Content-Type': 'application/json' },
  });
  await upload('cpuOnly', '/api/v1/sessions?name=cpu%20only', { body: trace(FILES.cpuOnly) });
  await upload('nccl', '/api/v1/sessions?name=nccl', { body: trace(FILES.nccl) });
});

test('POST /api/v1/sessions: chunked (no Content-Length), a legacy bare array, a native session', async () => {
  const plain = gunzipSync(trace(FILES.test));
  const chunks = [];
  for (let i = 0; i < plain.length; i += 700) chunks.push(plain.subarray(i, i + 700));
  await upload('chunked', '/api/v1/sessions?name=chunked', { chunks });

  const legacy = Buffer.from(JSON.stringify(JSON.parse(gunzipSync(trace(FILES.base))).traceEvents));
  await upload('legacy', '/api/v1/sessions?name=legacy', { body: legacy });

  // A firstpass native session, the shape docs/contract.md gives the collector.
  const native = {
    schemaVersion: 1,
    firstpass: {
      format: 'firstpass-session', version: 1, name: 'native decode', labels: { model: 'tiny' }, host: 'ci', pid: 123,
      command: 'python infer.py', cupti_version: 130001, driver_version: 13000, runtime_version: 13000, start_ns: 0, end_ns: 100000,
      dropped_records: 0, events_truncated: false,
      aggregates: { kernels: [{ name: 'gemm', calls: 1, total_ns: 30000, min_ns: 30000, max_ns: 30000 }], apis: [], ranges: [], memcpy: [] },
    },
    deviceProperties: [{ id: 0, name: 'NVIDIA H100 80GB HBM3', totalGlobalMem: 85000000000, computeMajor: 9, computeMinor: 0, numSms: 132,
      maxThreadsPerBlock: 1024, maxThreadsPerMultiprocessor: 2048, regsPerBlock: 65536, sharedMemPerBlock: 49152, warpSize: 32 }],
    traceEvents: [
      { ph: 'X', cat: 'cuda_runtime', name: 'cudaLaunchKernel', pid: 123, tid: 456, ts: 10.0, dur: 4.0, args: { correlation: 5, cbid: 211 } },
      { ph: 'X', cat: 'kernel', name: 'gemm', pid: 0, tid: 7, ts: 12.0, dur: 30.0,
        args: { correlation: 5, device: 0, stream: 7, grid: [1, 1, 1], block: [128, 1, 1], 'registers per thread': 32, 'shared memory': 0, context: 1 } },
      { ph: 'X', cat: 'gpu_memcpy', name: 'Memcpy HtoD (Pinned -> Device)', pid: 0, tid: 7, ts: 1, dur: 2,
        args: { correlation: 6, device: 0, stream: 7, bytes: 4096, kind: 'HtoD', src_kind: 'Pinned', dst_kind: 'Device' } },
      { ph: 'X', cat: 'user_annotation', name: 'prefill', pid: 123, tid: 456, ts: 0, dur: 100, args: { domain: 'default' } },
    ],
  };
  await upload('native', '/api/v1/sessions?label=run:native', { body: gzipSync(JSON.stringify(native)), headers: { 'Content-Type': 'application/gzip' } });
});

test('POST /api/v1/sessions: 400 invalid_json, invalid_trace, invalid_parameter', async () => {
  const P = '/api/v1/sessions';
  await expectError('POST', P, { body: '{"traceEvents":[' }, 400, 'invalid_json');
  await expectError('POST', P, { body: 'not json' }, 400, 'invalid_json');
  await expectError('POST', P, { body: 'not gzip', headers: { 'Content-Encoding': 'gzip' } }, 400, 'invalid_json');
  await expectError('POST', P, { body: '{"traceEvents":[{"ph":"X","name":"a","ts":"soon"}]}' }, 400, 'invalid_trace');
  await expectError('POST', P, { body: '{"traceEvents":[1]}' }, 400, 'invalid_trace');
  // Query parameters are the client's input, not the trace's: the same code GET uses.
  await expectError('POST', `${P}?label=nocolon`, { body: '{"traceEvents":[]}' }, 400, 'invalid_parameter');
  await expectError('POST', `${P}?name=${'n'.repeat(513)}`, { body: '{"traceEvents":[]}' }, 400, 'invalid_parameter');
});

test('POST /api/v1/sessions: 422 not_a_trace', async () => {
  const P = '/api/v1/sessions';
  await expectError('POST', P, { body: '{"foo":1}' }, 422, 'not_a_trace');
  await expectError('POST', P, { body: '42' }, 422, 'not_a_trace');
  await expectError('POST', P, { body: '' }, 422, 'not_a_trace');
});

test('POST /api/v1/sessions: 415 for Content-Encoding: br; an SQLite file that is no nsys export is 4xx', async () => {
  const P = '/api/v1/sessions';
  await expectError('POST', P, { body: '{"traceEvents":[]}', headers: { 'Content-Encoding': 'br' } }, 415, 'unsupported_media_type');
  // The SQLite magic and then zeros: a truncated file (400), never stored.
  const sqlite = Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(4096)]);
  await expectError('POST', P, { body: sqlite }, 400, 'invalid_trace');
});

test('POST /api/v1/sessions: 413 over --max-upload, by Content-Length and while streaming', async () => {
  const P = '/api/v1/sessions';
  const over = Buffer.alloc(MAX_UPLOAD + 4096, 0x20);
  await expectError('POST', P, { body: over }, 413, 'too_large');
  // Chunked: no Content-Length, so the limit is found while the (valid) events stream in.
  const ev = Buffer.from('{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1,"dur":1},');
  const chunks = [Buffer.from('{"traceEvents":[')];
  for (let n = 0; n < MAX_UPLOAD + 65536; n += ev.length * 512) chunks.push(Buffer.concat(Array(512).fill(ev)));
  chunks.push(Buffer.from('{}]}'));
  await expectError('POST', P, { chunks }, 413, 'too_large');
  await call('GET', '/api/v1/sessions?name=__none__', {}, 200); // the server is still fine
});

test('PATCH /api/v1/sessions: 405 with Allow: GET, POST', async () => {
  const res = await expectError('PATCH', '/api/v1/sessions', {}, 405, 'method_not_allowed');
  assert.equal(res.headers.allow, 'GET, POST');
});

// ---------------------------------------------------------------- list

test('GET /api/v1/sessions: newest first, filters', async () => {
  const { body } = await call('GET', '/api/v1/sessions', {}, 200);
  const all = body.sessions.map((s) => s.id);
  assert.deepEqual([...all].sort((a, b) => b - a), all, 'newest (highest id) first');
  for (const id of Object.values(ids)) assert.ok(all.includes(id), `session ${id} listed`);
  assert.equal(body.next, null);

  const pair = (await call('GET', '/api/v1/sessions?label=pair:cmp', {}, 200)).body.sessions.map((s) => s.id);
  assert.deepEqual(pair, [ids.test, ids.base]);
  const both = (await call('GET', '/api/v1/sessions?label=pair:cmp&label=side:base', {}, 200)).body.sessions;
  assert.deepEqual(both.map((s) => s.id), [ids.base]);
  assert.deepEqual(both[0].labels, { pair: 'cmp', side: 'base' });
  assert.deepEqual((await call('GET', '/api/v1/sessions?name=simple%20add', {}, 200)).body.sessions.map((s) => s.id), [ids.simpleAdd]);
  assert.deepEqual((await call('GET', '/api/v1/sessions?source=legacy', {}, 200)).body.sessions.map((s) => s.id), [ids.legacy]);
  const nat = (await call('GET', '/api/v1/sessions?source=firstpass', {}, 200)).body.sessions;
  assert.deepEqual(nat.map((s) => s.id), [ids.native]);
  assert.equal(nat[0].name, 'native decode');
  assert.deepEqual(nat[0].labels, { model: 'tiny', run: 'native' });
  assert.deepEqual((await call('GET', '/api/v1/sessions?until=1', {}, 200)).body.sessions, []);
  const since = Math.floor(Date.now() / 1000) - 3600;
  assert.equal((await call('GET', `/api/v1/sessions?since=${since}`, {}, 200)).body.sessions.length, all.length);
});

test('GET /api/v1/sessions: pagination with limit and next', async () => {
  const all = (await call('GET', '/api/v1/sessions', {}, 200)).body.sessions.map((s) => s.id);
  const got = [];
  let next = null, pages = 0;
  do {
    const { body } = await call('GET', `/api/v1/sessions?limit=3${next ? `&next=${next}` : ''}`, {}, 200);
    assert.ok(body.sessions.length <= 3);
    got.push(...body.sessions.map((s) => s.id));
    next = body.next;
    pages++;
  } while (next && pages < 20);
  assert.deepEqual(got, all);
  assert.equal(pages, Math.ceil(all.length / 3));
});

test('GET /api/v1/sessions: text/plain and text/csv', async () => {
  const rows = (await call('GET', '/api/v1/sessions?label=pair:cmp', {}, 200)).body.sessions;
  const cols = ['id', 'name', 'source', 'hardware', 'duration_us', 'event_count', 'top_cuda_operator', 'created_at'];
  const csv = await call('GET', '/api/v1/sessions?label=pair:cmp&format=csv', {}, 200);
  assert.match(csv.res.headers['content-type'], /^text\/csv/);
  const parsed = parseCsv(csv.body);
  assert.deepEqual(parsed[0], cols);
  assert.deepEqual(parsed.slice(1).map((r) => Number(r[0])), rows.map((s) => s.id));
  for (const q of [{ path: '?label=pair:cmp&format=text' }, { path: '?label=pair:cmp', headers: { Accept: 'text/plain' } }]) {
    const t = await call('GET', `/api/v1/sessions${q.path}`, { headers: q.headers }, 200);
    assert.match(t.res.headers['content-type'], /^text\/plain/);
    assert.equal(textLines(t.body).length, rows.length + 1);
  }
  // Accept naming JSON too, or ?format=json, is JSON.
  const j = await call('GET', '/api/v1/sessions?limit=1', { headers: { Accept: 'text/plain, application/json' } }, 200);
  assert.ok(Array.isArray(j.body.sessions));
  await call('GET', '/api/v1/sessions?limit=1&format=json', { headers: { Accept: 'text/plain' } }, 200);
});

test('GET /api/v1/sessions: 400 invalid_parameter', async () => {
  for (const q of ['limit=0', 'limit=1001', 'limit=x', 'label=nocolon', 'label=:v', 'next=-1', 'next=abc', 'since=-5', 'until=x'])
    await expectError('GET', `/api/v1/sessions?${q}`, {}, 400, 'invalid_parameter');
});

// ---------------------------------------------------------------- one session

test('GET /api/v1/sessions/{id}', async () => {
  for (const [name, id] of Object.entries(ids)) {
    const { body } = await call('GET', `/api/v1/sessions/${id}`, {}, 200);
    assert.equal(body.id, id);
    assert.equal(body.event_count, events[name], `${name}: event_count is what the upload counted`);
    const counted = Object.values(body.counts ?? {}).reduce((a, b) => a + b, 0);
    assert.equal(counted, body.event_count, `${name}: counts add up to event_count`);
  }
  const s = (await call('GET', `/api/v1/sessions/${ids.simpleAdd}`, {}, 200)).body;
  assert.equal(s.name, 'simple add');
  assert.equal(s.source, 'kineto');
  assert.equal(s.devices.length, 8);
  assert.equal(s.hardware, 'NVIDIA A100-PG509-200 x1 (of 8 on the node)'); // the GPUs the run used (issue 51)
  const n = (await call('GET', `/api/v1/sessions/${ids.native}`, {}, 200)).body;
  assert.equal(n.source, 'firstpass');
  assert.equal(n.collector.format, 'firstpass-session');
  assert.equal((await call('GET', `/api/v1/sessions/${ids.legacy}`, {}, 200)).body.source, 'legacy');
  const c = (await call('GET', `/api/v1/sessions/${ids.cpuOnly}`, {}, 200)).body;
  assert.equal(c.gpu_idle_fraction, null);
  assert.equal(c.top_cuda_operator, null);
  // JSON only, whatever Accept says.
  await call('GET', `/api/v1/sessions/${ids.base}`, { headers: { Accept: 'text/plain' } }, 200);
});

test('GET /api/v1/sessions/{id}: 404 unknown id, no route for a non-numeric or zero id, 405', async () => {
  await expectError('GET', '/api/v1/sessions/999999', {}, 404, 'not_found');
  await expectError('GET', '/api/v1/sessions/abc', {}, 404, 'not_found');
  await expectError('GET', '/api/v1/sessions/0', {}, 404, 'not_found');
  const res = await expectError('PATCH', `/api/v1/sessions/${ids.base}`, {}, 405, 'method_not_allowed');
  assert.equal(res.headers.allow, 'GET, DELETE');
});

// ---------------------------------------------------------------- operators

const SORT_KEY = {
  cuda_time_total: 'cuda_time_total_us', self_cuda_time_total: 'self_cuda_time_total_us', cpu_time_total: 'cpu_time_total_us',
  self_cpu_time_total: 'self_cpu_time_total_us', calls: 'calls', cpu_memory_usage: 'cpu_memory_usage_bytes',
  cuda_memory_usage: 'cuda_memory_usage_bytes', self_cpu_memory_usage: 'self_cpu_memory_usage_bytes', self_cuda_memory_usage: 'self_cuda_memory_usage_bytes',
};
const OP_CSV = ['name', 'kind', 'input_shapes', 'calls', 'self_cpu_time_total_us', 'cpu_time_total_us', 'cpu_time_avg_us', 'self_cuda_time_total_us',
  'cuda_time_total_us', 'cuda_time_avg_us', 'cpu_memory_usage_bytes', 'self_cpu_memory_usage_bytes', 'cuda_memory_usage_bytes', 'self_cuda_memory_usage_bytes'];
const nonIncreasing = (rows, k) => rows.every((r, i) => i === 0 || rows[i - 1][k] >= r[k]);

test('GET /api/v1/sessions/{id}/operators: every sort, limit, kind, group_by', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/operators`;
  const def = (await call('GET', P, {}, 200)).body;
  assert.equal(def.sort, 'cuda_time_total');
  assert.equal(def.group_by_input_shape, false);
  assert.ok(def.operators.length > 10);
  for (const [sort, k] of Object.entries(SORT_KEY)) {
    const { body } = await call('GET', `${P}?sort=${sort}&limit=1000`, {}, 200);
    assert.equal(body.sort, sort);
    assert.ok(nonIncreasing(body.operators, k), `sorted by ${k}`);
  }
  assert.equal((await call('GET', `${P}?limit=3`, {}, 200)).body.operators.length, 3);
  const k = (await call('GET', `${P}?kind=kernel`, {}, 200)).body.operators;
  assert.ok(k.length > 0 && k.every((r) => r.kind === 'kernel'));
  // simple_add was profiled without record_shapes; base has "Input Dims".
  const g = (await call('GET', `/api/v1/sessions/${ids.base}/operators?group_by=input_shape&kind=cpu_op`, {}, 200)).body;
  assert.equal(g.group_by_input_shape, true);
  assert.ok(g.operators.some((r) => r.input_shapes.startsWith('[')));
  await call('GET', `${P}?group_by=name`, {}, 200);
  for (const id of Object.values(ids)) await call('GET', `/api/v1/sessions/${id}/operators`, {}, 200);
});

test('GET /api/v1/sessions/{id}/operators: text/plain (torch table) and text/csv', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/operators?sort=cuda_time_total&limit=5`;
  const rows = (await call('GET', P, {}, 200)).body.operators;
  const t = (await call('GET', `${P}&format=text`, {}, 200)).body;
  assert.equal(textLines(t).length, 3 + rows.length + 1 + 2);
  assert.equal((await call('GET', P, { headers: { Accept: 'text/plain' } }, 200)).body, t);
  const shapes = (await call('GET', `${P}&group_by=input_shape&format=text`, {}, 200)).body;
  assert.match(shapes, /Input Shapes/);
  const csv = (await call('GET', `${P}&format=csv`, {}, 200)).body;
  assertCsvMatches(csv, rows, OP_CSV);
  await call('GET', `/api/v1/sessions/${ids.cpuOnly}/operators?format=text`, {}, 200);
});

test('GET /api/v1/sessions/{id}/operators: 400, 404', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/operators`;
  for (const q of ['sort=bogus', 'sort=name', 'group_by=bogus', 'limit=0', 'limit=10001', 'limit=x'])
    await expectError('GET', `${P}?${q}`, {}, 400, 'invalid_parameter');
  await expectError('GET', `${P}?sort=bogus&format=text`, {}, 400, 'invalid_parameter'); // errors stay JSON
  await expectError('GET', '/api/v1/sessions/999999/operators', {}, 404, 'not_found');
  await expectError('GET', '/api/v1/sessions/999999/operators?format=csv', {}, 404, 'not_found');
  await call('POST', P, {}, 405);
});

// ---------------------------------------------------------------- kernels, phases, gpu

const K_CSV = ['name', 'kind', 'calls', 'total_us', 'mean_us', 'min_us', 'max_us', 'share', 'grid', 'block', 'registers_per_thread',
  'shared_memory_bytes', 'est_occupancy', 'est_sm_efficiency', 'blocks_per_sm', 'tensor_core'];

test('GET /api/v1/sessions/{id}/kernels: blocks_per_sm and tensor_core, in JSON and CSV', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/kernels`;
  const rows = (await call('GET', `${P}?limit=1000`, {}, 200)).body.kernels;
  const k = rows.find((r) => Array.isArray(r.grid) && r.blocks_per_sm !== null);
  assert.ok(k, 'a kernel with a grid and device properties has blocks_per_sm');
  assert.ok(rows.some((r) => r.tensor_core) || rows.every((r) => !/884|1688|16816|hmma|xmma|tensorop/i.test(r.name)));
  for (const r of rows) if (r.kind !== 'kernel') assert.equal(r.tensor_core, false, `${r.kind} is not tensor-core work`);
  const csv = parseCsv((await call('GET', `${P}?limit=1000&format=csv`, {}, 200)).body);
  const at = csv[0].indexOf('blocks_per_sm'), tc = csv[0].indexOf('tensor_core');
  const i = rows.indexOf(k);
  assert.equal(Number(csv[i + 1][at]).toFixed(3), k.blocks_per_sm.toFixed(3));
  assert.equal(csv[i + 1][tc], String(k.tensor_core));
});

test('GET /api/v1/sessions/{id}/kernels', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/kernels`;
  const def = (await call('GET', P, {}, 200)).body.kernels;
  assert.ok(def.length > 5 && nonIncreasing(def, 'total_us'));
  assert.ok(def.some((r) => Array.isArray(r.grid)), 'kernels carry grid/block');
  const share = def.reduce((a, r) => a + r.share, 0);
  assert.ok(Math.abs(share - 1) < 1e-6, `shares add up to 1, not ${share}`);
  for (const sort of ['total_us', 'calls', 'mean_us']) {
    const { body } = await call('GET', `${P}?sort=${sort}&limit=1000`, {}, 200);
    assert.ok(nonIncreasing(body.kernels, sort), `sorted by ${sort}`);
  }
  assert.equal((await call('GET', `${P}?limit=2`, {}, 200)).body.kernels.length, 2);
  assert.deepEqual((await call('GET', `/api/v1/sessions/${ids.cpuOnly}/kernels`, {}, 200)).body.kernels, []);
  for (const q of ['sort=name', 'sort=bogus', 'limit=0', 'limit=x']) await expectError('GET', `${P}?${q}`, {}, 400, 'invalid_parameter');
  await expectError('GET', '/api/v1/sessions/999999/kernels', {}, 404, 'not_found');
  await call('DELETE', P, {}, 405);
});

test('GET /api/v1/sessions/{id}/kernels: text/plain and text/csv (names in full, however long)', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/kernels`;
  const def = (await call('GET', P, {}, 200)).body.kernels;
  assert.ok(def.some((r) => r.name.length > 2048), 'simple_add has a kernel name over 2 KiB');
  assert.equal(textLines((await call('GET', `${P}?format=text`, {}, 200)).body).length, def.length + 1);
  await call('GET', P, { headers: { Accept: 'text/plain' } }, 200);
  assertCsvMatches((await call('GET', `${P}?format=csv`, {}, 200)).body, def, K_CSV);
});

const PH_CSV = ['name', 'kind', 'count', 'total_us', 'mean_us', 'gpu_busy_us', 'kernels', 'kernel_mean_us', 'cpu_only_us'];

test('GET /api/v1/sessions/{id}/phases', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/phases`;
  const rows = (await call('GET', P, {}, 200)).body.phases;
  assert.ok(rows.length > 0 && nonIncreasing(rows, 'total_us'));
  assertCsvMatches((await call('GET', `${P}?format=csv`, {}, 200)).body, rows, PH_CSV);
  assert.equal(textLines((await call('GET', `${P}?format=text`, {}, 200)).body).length, rows.length + 1);
  await call('GET', P, { headers: { Accept: 'text/plain' } }, 200);
  for (const id of Object.values(ids)) await call('GET', `/api/v1/sessions/${id}/phases`, {}, 200);
  await expectError('GET', '/api/v1/sessions/999999/phases', {}, 404, 'not_found');
  await call('PUT', P, {}, 405);
});

test('GET /api/v1/sessions/{id}/gpu', async () => {
  for (const id of Object.values(ids)) await call('GET', `/api/v1/sessions/${id}/gpu`, {}, 200);
  const g = (await call('GET', `/api/v1/sessions/${ids.simpleAdd}/gpu`, {}, 200)).body;
  assert.ok(g.devices.length >= 1 && g.launch.count > 0 && g.copies.length > 0);
  const c = (await call('GET', `/api/v1/sessions/${ids.cpuOnly}/gpu`, {}, 200)).body;
  assert.equal(c.gpu_idle_fraction, null);
  assert.deepEqual(c.devices, []);
  await expectError('GET', '/api/v1/sessions/999999/gpu', {}, 404, 'not_found');
  await call('POST', `/api/v1/sessions/${ids.base}/gpu`, {}, 405);
});

test('GET /api/v1/sessions/{id}/suspects: JSON, text, csv; 404, 405', async () => {
  for (const id of Object.values(ids)) {
    const b = (await call('GET', `/api/v1/sessions/${id}/suspects`, {}, 200)).body;
    assert.equal(b.computed, true);
    for (let i = 1; i < b.suspects.length; i++) assert.ok(b.suspects[i - 1].at_stake_us >= b.suspects[i].at_stake_us);
  }
  const c = (await call('GET', `/api/v1/sessions/${ids.cpuOnly}/suspects`, {}, 200)).body;
  assert.equal(c.gpu, null);
  const P = `/api/v1/sessions/${ids.simpleAdd}/suspects`;
  assert.match((await call('GET', `${P}?format=text`, {}, 200)).body, /^healthy: (yes|no); wall /);
  await call('GET', `${P}?format=csv`, {}, 200);
  await expectError('GET', '/api/v1/sessions/999999/suspects', {}, 404, 'not_found');
  await call('POST', P, {}, 405);
});

test('GET /api/v1/sessions/{id}/steps, /memory and /efficiency: JSON, text, csv; 404, 405', async () => {
  for (const what of ['steps', 'memory', 'efficiency']) {
    for (const id of Object.values(ids)) await call('GET', `/api/v1/sessions/${id}/${what}`, {}, 200);
    const P = `/api/v1/sessions/${ids.simpleAdd}/${what}`;
    await call('GET', `${P}?format=text`, {}, 200);
    await call('GET', `${P}?format=csv`, {}, 200);
    await expectError('GET', `/api/v1/sessions/999999/${what}`, {}, 404, 'not_found');
    await call('DELETE', P, {}, 405);
  }
  // the steps are paged (issue 50)
  const s = (await call('GET', `/api/v1/sessions/${ids.simpleAdd}/steps?offset=0&limit=1`, {}, 200)).body;
  assert.ok(s.steps.length <= 1 && s.total >= s.steps.length && s.limit === 1);
  await expectError('GET', `/api/v1/sessions/${ids.simpleAdd}/steps?limit=0`, {}, 400, 'invalid_parameter');
});

test('GET /api/v1/jobs and /api/v1/jobs/{name}: JSON, text, csv; 404, 405', async () => {
  for (const f of ['', '?format=text', '?format=csv']) await call('GET', `/api/v1/jobs${f}`, {}, 200);
  await call('POST', '/api/v1/jobs', {}, 405);
  const jobs = (await call('GET', '/api/v1/jobs', {}, 200)).body.jobs;
  assert.ok(jobs.length >= 1, 'a session uploaded with label job: exists');
  const P = `/api/v1/jobs/${encodeURIComponent(jobs[0].job)}`;
  for (const f of ['', '?format=text', '?format=csv']) await call('GET', `${P}${f}`, {}, 200);
  await expectError('GET', '/api/v1/jobs/no-such-job', {}, 404, 'not_found');
  await expectError('GET', `/api/v1/jobs/${'j'.repeat(600)}`, {}, 400, 'invalid_parameter');
  await call('DELETE', P, {}, 405);
});

// ---------------------------------------------------------------- report

const TITLES = ['Workload', 'Hardware', 'Top CUDA time', 'Top CPU / orchestration cost', 'Next experiment'];
const LINE_KEYS = ['workload', 'hardware', 'top_cuda_time', 'top_cpu_cost', 'next_experiment'];
const asText = (lines) => LINE_KEYS.map((k, i) => `${TITLES[i]}: ${lines[k]}\n`).join('');

test('GET /api/v1/sessions/{id}/report: JSON and the five lines as text', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/report`;
  const r = (await call('GET', P, {}, 200)).body;
  assert.deepEqual(r.lines, r.draft);
  assert.deepEqual(r.edited, []);
  assert.deepEqual(r.smells.map((s) => s.id).sort(), ['cheap_operator_called_often', 'gpu_idle_host_bound', 'one_operator_owns_the_run']);
  const summary = (await call('GET', '/api/v1/sessions?name=simple%20add', {}, 200)).body.sessions[0];
  assert.deepEqual(r.smells.filter((s) => s.fired).map((s) => s.id).sort(), [...summary.smells].sort(), 'the summary lists the fired smells');
  assert.equal((await call('GET', `${P}?format=text`, {}, 200)).body, asText(r.lines));
  assert.equal((await call('GET', P, { headers: { Accept: 'text/plain' } }, 200)).body, asText(r.lines));
  for (const id of Object.values(ids)) await call('GET', `/api/v1/sessions/${id}/report`, {}, 200);
  await expectError('GET', '/api/v1/sessions/999999/report', {}, 404, 'not_found');
});

test('PUT /api/v1/sessions/{id}/report: edit, restore with null and ""', async () => {
  const P = `/api/v1/sessions/${ids.base}/report`;
  const before = (await call('GET', P, {}, 200)).body;
  const put = (lines, q = '') => call('PUT', P + q, { body: JSON.stringify({ lines }), headers: { 'Content-Type': 'application/json' } }, 200);
  let r = (await put({ next_experiment: 'try torch.compile', workload: 'base run, batch 8' })).body;
  assert.equal(r.lines.next_experiment, 'try torch.compile');
  assert.equal(r.lines.workload, 'base run, batch 8');
  assert.deepEqual(r.draft, before.draft);
  assert.deepEqual([...r.edited].sort(), ['next_experiment', 'workload']);
  assert.deepEqual((await call('GET', P, {}, 200)).body, r, 'GET returns what PUT replied');
  const t = (await put({ hardware: 'one A100' }, '?format=text')).body;
  assert.equal(t, asText({ ...r.lines, hardware: 'one A100' }));
  r = (await put({ workload: null, hardware: '' })).body;
  assert.equal(r.lines.workload, before.draft.workload);
  assert.equal(r.lines.hardware, before.draft.hardware);
  assert.deepEqual(r.edited, ['next_experiment']);
  r = (await put({})).body;
  assert.deepEqual(r.edited, ['next_experiment']);
  r = (await put({ next_experiment: null })).body;
  assert.deepEqual(r.lines, before.draft);
  assert.deepEqual(r.edited, []);
});

test('PUT /api/v1/sessions/{id}/report: 400, 404, 413, 422, 405', async () => {
  const P = `/api/v1/sessions/${ids.base}/report`;
  await expectError('PUT', P, { body: 'nope' }, 400, 'invalid_json');
  await expectError('PUT', P, {}, 400, 'invalid_json');
  await expectError('PUT', P, { body: '{"foo":1}' }, 422, 'invalid_report');
  await expectError('PUT', P, { body: '[1]' }, 422, 'invalid_report');
  await expectError('PUT', P, { body: '{"lines":"x"}' }, 422, 'invalid_report');
  await expectError('PUT', P, { body: '{"lines":{"bogus":"x"}}' }, 422, 'invalid_report');
  await expectError('PUT', P, { body: '{"lines":{"workload":5}}' }, 422, 'invalid_report');
  await expectError('PUT', P, { body: JSON.stringify({ lines: { workload: 'w'.repeat(4001) } }) }, 422, 'invalid_report');
  await expectError('PUT', P, { body: ' '.repeat(300 * 1024) }, 413, 'too_large');
  await expectError('PUT', '/api/v1/sessions/999999/report', { body: '{"lines":{}}' }, 404, 'not_found');
  const res = await expectError('DELETE', P, {}, 405, 'method_not_allowed');
  assert.equal(res.headers.allow, 'GET, PUT');
  assert.deepEqual((await call('GET', P, {}, 200)).body.edited, [], 'failed edits changed nothing');
});

// ---------------------------------------------------------------- timeline

test('GET /api/v1/sessions/{id}/timeline: whole session, a window, bucket mode', async () => {
  const s = (await call('GET', '/api/v1/sessions?name=simple%20add', {}, 200)).body.sessions[0];
  const P = `/api/v1/sessions/${ids.simpleAdd}/timeline`;
  const all = (await call('GET', P, {}, 200)).body;
  assert.equal(all.start_us, s.start_us);
  assert.equal(all.end_us, s.end_us);
  assert.ok(all.tracks.some((t) => t.kind === 'cpu') && all.tracks.some((t) => t.kind === 'gpu'));
  const a = s.start_us + s.duration_us / 2, b = a + s.duration_us / 10;
  const w = (await call('GET', `${P}?start_us=${a}&end_us=${b}&buckets=50`, {}, 200)).body;
  assert.equal(w.start_us, a);
  assert.equal(w.end_us, b);
  for (const t of w.tracks) for (const e of t.events ?? []) assert.ok(e.ts_us < b && e.ts_us + e.dur_us > a, 'events overlap the window');

  const N = `/api/v1/sessions/${ids.nccl}/timeline`;
  const n = (await call('GET', `${N}?buckets=40`, {}, 200)).body;
  const bucketed = n.tracks.filter((t) => t.mode === 'buckets');
  assert.ok(bucketed.length > 0, 'a track with > 2,000 events is bucketed');
  for (const t of bucketed) assert.equal(t.buckets.length, 40);
  for (const id of Object.values(ids)) await call('GET', `/api/v1/sessions/${id}/timeline?buckets=10`, {}, 200);
});

test('GET /api/v1/sessions/{id}/timeline: exact counts per track and of GPU work', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/timeline`;
  const all = (await call('GET', P, {}, 200)).body;
  const gpu = (await call('GET', `/api/v1/sessions/${ids.simpleAdd}/gpu`, {}, 200)).body;
  const work = gpu.devices.flatMap((d) => d.streams).reduce((a, s) => a + s.events, 0);
  assert.equal(all.gpu_events, work, 'the whole session: every kernel, copy and memset');
  for (const t of all.tracks) if (t.mode === 'events') assert.equal(t.count, t.events.length, t.id);
  const cpu = all.tracks.filter((t) => t.kind === 'cpu').reduce((a, t) => a + t.count, 0);
  assert.equal(all.cpu_events, cpu);
  const N = (await call('GET', `/api/v1/sessions/${ids.nccl}/timeline?buckets=40`, {}, 200)).body;
  const b = N.tracks.find((t) => t.mode === 'buckets');
  assert.ok(b.count > 2000, 'a bucketed track still says its exact count');
});

test('GET /api/v1/sessions/{id}/area: an area selection\'s summary, per track and by name', async () => {
  const s = (await call('GET', `/api/v1/sessions/${ids.simpleAdd}`, {}, 200)).body;
  const P = `/api/v1/sessions/${ids.simpleAdd}/area`;
  const a = s.start_us, b = s.end_us;
  const all = (await call('GET', `${P}?start_us=${a}&end_us=${b}&names=3`, {}, 200)).body;
  const tl = (await call('GET', `/api/v1/sessions/${ids.simpleAdd}/timeline?start_us=${a}&end_us=${b}&buckets=1`, {}, 200)).body;
  for (const t of all.tracks) {
    assert.ok(t.names.length <= 3);
    const tt = tl.tracks.find((x) => x.id === t.id);
    if (tt) assert.equal(t.count, tt.count, `${t.id}: the timeline's count`);
    assert.equal(t.names.reduce((x, n) => x + n.count, 0) + t.other.count, t.count, `${t.id}: names and other add up`);
  }
  const one = all.tracks[0].id;
  const only = (await call('GET', `${P}?start_us=${a}&end_us=${b}&tracks=${encodeURIComponent(one)}`, {}, 200)).body;
  assert.deepEqual(only.tracks.map((t) => t.id), [one]);
  await expectError('GET', `${P}?start_us=${a}`, {}, 400, 'invalid_parameter');
  await expectError('GET', `${P}?start_us=${b}&end_us=${a}`, {}, 400, 'invalid_parameter');
  await expectError('GET', `${P}?start_us=${a}&end_us=${b}&names=0`, {}, 400, 'invalid_parameter');
  await expectError('GET', `/api/v1/sessions/999999/area?start_us=1&end_us=2`, {}, 404, 'not_found');
  const res = await expectError('POST', `${P}?start_us=${a}&end_us=${b}`, {}, 405, 'method_not_allowed');
  assert.equal(res.headers.allow, 'GET');
});

test('GET /api/v1/sessions/{id}/busy: the union of GPU work, per device, stream and slice', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/busy`;
  const gpu = (await call('GET', `/api/v1/sessions/${ids.simpleAdd}/gpu`, {}, 200)).body;
  const all = (await call('GET', `${P}?buckets=20`, {}, 200)).body;
  assert.equal(all.devices.length, gpu.devices.length);
  for (const d of all.devices) {
    const g = gpu.devices.find((x) => x.device === d.device);
    assert.ok(Math.abs(d.busy_us - g.busy_us) < 1e-3, `device ${d.device}: ${d.busy_us} vs /gpu ${g.busy_us}`);
    assert.equal(d.buckets.length, 20);
    const fromSlices = d.buckets.reduce((a, x) => a + x, 0) * all.wall_us / 20;
    assert.ok(Math.abs(fromSlices - d.busy_us) < 1e-3 * all.wall_us, 'the slices add up to the busy time');
  }
  const mid = all.start_us + all.wall_us / 2;
  const half = (await call('GET', `${P}?start_us=${mid}`, {}, 200)).body;
  assert.equal(half.start_us, mid);
  assert.ok(half.devices[0].busy_us <= all.devices[0].busy_us);
  assert.equal(half.devices[0].buckets, undefined);
  for (const q of ['buckets=-1', 'buckets=10001', 'start_us=x']) await expectError('GET', `${P}?${q}`, {}, 400, 'invalid_parameter');
  await expectError('GET', '/api/v1/sessions/999999/busy', {}, 404, 'not_found');
  await call('POST', P, {}, 405);
});

test('GET /api/v1/sessions/{id}/events: select, launch flow, search next/prev', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/events`;
  const first = (await call('GET', `${P}?q=vectorized`, {}, 200)).body;
  assert.ok(first.event && /vectorized/i.test(first.event.name), 'a kernel found by a part of its name, any case');
  assert.equal(first.event.cat, 'kernel');
  assert.ok(first.launched_by && first.launched_by.correlation === first.event.correlation, 'launched by its runtime call');
  assert.ok(first.launched_by.ts_us <= first.event.ts_us);
  const back = (await call('GET', `${P}?ref=${first.launched_by.ref}`, {}, 200)).body;
  assert.ok(back.launches.some((k) => k.ref === first.event.ref), 'the call launches the kernel');
  const at = (await call('GET', `${P}?track=${encodeURIComponent(first.event.track)}&ts_us=${first.event.ts_us}`, {}, 200)).body;
  assert.equal(at.event.ref, first.event.ref);
  assert.deepEqual(at.event.args, first.event.args);
  // next then prev returns to the start; every step moves forward in (ts, ref) order
  const next = (await call('GET', `${P}?q=vectorized&ref=${first.event.ref}`, {}, 200)).body.event;
  assert.ok(next && next.ts_us >= first.event.ts_us && next.ref !== first.event.ref);
  const prev = (await call('GET', `${P}?q=vectorized&ref=${next.ref}&dir=prev`, {}, 200)).body.event;
  assert.equal(prev.ref, first.event.ref);
  assert.equal((await call('GET', `${P}?q=vectorized&ref=${first.event.ref}&dir=prev`, {}, 200)).body.event, null);
  assert.equal((await call('GET', `${P}?q=no-such-name-anywhere`, {}, 200)).body.event, null);
  for (const q of ['', 'q=', 'track=cpu:1:1', 'dir=up&q=a', 'ts_us=x&track=a', 'ref=1:2'])
    await expectError('GET', `${P}?${q}`, {}, 400, 'invalid_parameter');
  await expectError('GET', `${P}?ref=0:999999:0`, {}, 404, 'not_found');
  await expectError('GET', '/api/v1/sessions/999999/events?q=a', {}, 404, 'not_found');
  await call('DELETE', P, {}, 405);
});

test('GET /api/v1/sessions?q=: a substring of the name, any case', async () => {
  const all = (await call('GET', '/api/v1/sessions?limit=1000', {}, 200)).body.sessions;
  const s = all.find((x) => x.name.length > 4);
  const part = s.name.slice(1, -1).toUpperCase();
  const hit = (await call('GET', `/api/v1/sessions?q=${encodeURIComponent(part)}&limit=1000`, {}, 200)).body.sessions;
  assert.deepEqual(hit.map((x) => x.id), all.filter((x) => x.name.toUpperCase().includes(part)).map((x) => x.id));
  assert.equal((await call('GET', '/api/v1/sessions?q=zz-no-such-zz', {}, 200)).body.sessions.length, 0);
});

test('GET /api/v1/sessions/{id}/timeline: 400, 404', async () => {
  const P = `/api/v1/sessions/${ids.simpleAdd}/timeline`;
  for (const q of ['buckets=0', 'buckets=10001', 'buckets=x', 'start_us=abc', 'end_us=1e999', 'start_us='])
    await expectError('GET', `${P}?${q}`, {}, 400, 'invalid_parameter');
  await expectError('GET', '/api/v1/sessions/999999/timeline', {}, 404, 'not_found');
  await call('PATCH', P, {}, 405);
});

// ---------------------------------------------------------------- trace download

test('GET /api/v1/sessions/{id}/trace: plain and gzip, complete documents', async () => {
  for (const name of ['simpleAdd', 'base', 'legacy', 'native']) {
    const P = `/api/v1/sessions/${ids[name]}/trace`;
    const plain = await call('GET', P, {}, 200);
    assert.equal(plain.res.headers['content-encoding'], undefined);
    assert.equal(plain.res.headers['content-disposition'], `attachment; filename="firstpass-session-${ids[name]}.json"`);
    const uploaded = plain.body.traceEvents.filter((e) => !e.args?.firstpass_synthesized);
    assert.equal(uploaded.length, events[name], `${name}: every event comes back`);
    const gz = await call('GET', P, { headers: { 'Accept-Encoding': 'gzip' } }, 200);
    assert.equal(gz.res.headers['content-encoding'], 'gzip');
    assert.deepEqual(gz.res.raw.subarray(0, 2), Buffer.from([0x1f, 0x8b]), 'the bytes are gzip');
    assert.deepEqual(gz.body, plain.body, `${name}: gzip and plain are the same document`);
  }
  const orig = JSON.parse(gunzipSync(trace(FILES.base)));
  const back = (await call('GET', `/api/v1/sessions/${ids.base}/trace`, { headers: { 'Accept-Encoding': 'gzip' } }, 200)).body;
  assert.deepEqual(back.distributedInfo, orig.distributedInfo, 'top-level keys are kept');
  const kept = back.traceEvents.filter((e) => !e.args?.firstpass_synthesized);
  assert.deepEqual(kept.map((e) => e.name).sort(), orig.traceEvents.map((e) => e.name).sort());
});

test('GET /api/v1/sessions/{id}/trace?format=gzip: the .json.gz file itself (issue 51)', async () => {
  const P = `/api/v1/sessions/${ids.base}/trace`;
  const f = await call('GET', `${P}?format=gzip`, {}, 200);
  assert.equal(f.res.headers['content-encoding'], undefined, 'no Content-Encoding: the body is the file');
  assert.equal(f.res.headers['content-type'], 'application/gzip');
  assert.equal(f.res.headers['content-disposition'], `attachment; filename="firstpass-session-${ids.base}.json.gz"`);
  assert.deepEqual(JSON.parse(gunzipSync(f.res.raw)), (await call('GET', P, {}, 200)).body);
  await expectError('GET', `${P}?format=zip`, {}, 400, 'invalid_parameter');
});

test('GET /api/v1/sessions/{id}/trace: 404, 405', async () => {
  await expectError('GET', '/api/v1/sessions/999999/trace', {}, 404, 'not_found');
  await call('DELETE', `/api/v1/sessions/${ids.base}/trace`, {}, 405);
});

// ---------------------------------------------------------------- compare

// flat: one value a column (issue 51: the nested objects were JSON in a cell)
const CMP_CSV = ['name', 'kind', 'status', 'base_calls', 'head_calls', 'delta_calls', 'base_cuda_time_total_us', 'head_cuda_time_total_us',
  'delta_cuda_time_total_us', 'relative_cuda_time_total', 'base_cpu_time_total_us', 'head_cpu_time_total_us', 'delta_cpu_time_total_us',
  'relative_cpu_time_total', 'base_self_cuda_time_total_us', 'head_self_cuda_time_total_us', 'base_self_cpu_time_total_us',
  'head_self_cpu_time_total_us'];

test('GET /api/v1/compare', async () => {
  const P = `/api/v1/compare?base=${ids.base}&head=${ids.test}`;
  const c = (await call('GET', P, {}, 200)).body;
  assert.equal(c.base.id, ids.base);
  assert.equal(c.head.id, ids.test);
  assert.ok(c.operators.length > 0 && c.phases.length > 0);
  const st = new Set(c.operators.map((r) => r.status));
  assert.ok(st.has('changed') && st.has('appeared'), [...st].join());
  const d = (r) => Math.abs(r.delta.cuda_time_total_us);
  assert.ok(c.operators.every((r, i) => i === 0 || d(c.operators[i - 1]) >= d(r)), 'sorted by |delta CUDA|');
  assert.ok(c.phases.every((r, i) => i === 0 || Math.abs(c.phases[i - 1].delta.total_us) >= Math.abs(r.delta.total_us)));
  const self = (await call('GET', `/api/v1/compare?base=${ids.base}&head=${ids.base}`, {}, 200)).body;
  assert.ok(self.operators.every((r) => r.status === 'changed' && r.delta.cuda_time_total_us === 0));
  const gone = (await call('GET', `/api/v1/compare?base=${ids.simpleAdd}&head=${ids.cpuOnly}`, {}, 200)).body;
  assert.ok(gone.operators.some((r) => r.status === 'disappeared'));
});

test('GET /api/v1/compare: text/plain and text/csv list the operator rows', async () => {
  const P = `/api/v1/compare?base=${ids.base}&head=${ids.test}`;
  const rows = JSON.parse((await request('GET', P)).text).operators; // the JSON form is checked above
  assertCsvMatches((await call('GET', `${P}&format=csv`, {}, 200)).body, rows, CMP_CSV);
  assert.equal(textLines((await call('GET', `${P}&format=text`, {}, 200)).body).length, rows.length + 1);
  await call('GET', P, { headers: { Accept: 'text/plain' } }, 200);
});

test('GET /api/v1/compare: 400, 404, 405', async () => {
  for (const q of ['', `base=${ids.base}`, `head=${ids.base}`, `base=x&head=${ids.base}`, `base=0&head=${ids.base}`, `base=${ids.base}&head=-1`])
    await expectError('GET', `/api/v1/compare?${q}`, {}, 400, 'invalid_parameter');
  await expectError('GET', `/api/v1/compare?base=${ids.base}&head=999999`, {}, 404, 'not_found');
  await expectError('GET', `/api/v1/compare?base=999999&head=${ids.base}`, {}, 404, 'not_found');
  const res = await expectError('DELETE', '/api/v1/compare', {}, 405, 'method_not_allowed');
  assert.equal(res.headers.allow, 'GET');
  await expectError('POST', '/api/v1/compare', {}, 405, 'method_not_allowed');
});

// ---------------------------------------------------------------- history (baselines, regressions, trends)

test('PUT/GET/DELETE /api/v1/baselines/{name} and GET /api/v1/baselines', async () => {
  const P = '/api/v1/baselines/oa-main';
  const { res, body } = await call('PUT', P, { body: JSON.stringify({ session_id: ids.base }) }, 201);
  assert.equal(res.headers.location, P);
  assert.deepEqual(body.labels, { pair: 'cmp', side: 'base' });
  const b2 = (await call('PUT', P, { body: JSON.stringify({ session_id: ids.base, labels: { pair: 'cmp' } }) }, 200)).body;
  assert.deepEqual(b2.labels, { pair: 'cmp' });
  assert.equal((await call('GET', P, {}, 200)).body.session_id, ids.base);
  const list = (await call('GET', '/api/v1/baselines?label=pair:cmp', {}, 200)).body.baselines;
  assert.deepEqual(list.map((x) => x.name), ['oa-main']);
  const t = (await call('GET', '/api/v1/baselines?format=text', {}, 200)).res.text;
  assert.match(t, /^name +session_id/);
  assertCsvMatches((await call('GET', '/api/v1/baselines?format=csv', {}, 200)).res.text, list,
    ['name', 'session_id', 'session_name', 'labels', 'updated_at']);
  await call('PUT', '/api/v1/baselines/oa-gone', { body: JSON.stringify({ session_id: ids.test }) }, 201);
  await call('DELETE', '/api/v1/baselines/oa-gone', {}, 204);
});

test('/api/v1/baselines: 400, 404, 413, 422, 405', async () => {
  await expectError('GET', '/api/v1/baselines?label=nocolon', {}, 400, 'invalid_parameter');
  for (const m of ['GET', 'DELETE']) await expectError(m, '/api/v1/baselines/bad$name', {}, 400, 'invalid_parameter');
  await expectError('PUT', `/api/v1/baselines/${'n'.repeat(65)}`, { body: '{"session_id":1}' }, 400, 'invalid_parameter');
  await expectError('PUT', '/api/v1/baselines/oa-x', { body: 'nope' }, 400, 'invalid_json');
  await expectError('PUT', '/api/v1/baselines/oa-x', { body: ' '.repeat(300 * 1024) }, 413, 'too_large');
  await expectError('PUT', '/api/v1/baselines/oa-x', { body: '{"session_id":"1"}' }, 422, 'invalid_baseline');
  await expectError('PUT', '/api/v1/baselines/oa-x', { body: `{"session_id":${ids.base},"labels":{"k":1}}` }, 422, 'invalid_baseline');
  await expectError('PUT', '/api/v1/baselines/oa-x', { body: '{"session_id":999999}' }, 422, 'unknown_session');
  await expectError('GET', '/api/v1/baselines/oa-x', {}, 404, 'not_found');
  await expectError('DELETE', '/api/v1/baselines/oa-x', {}, 404, 'not_found');
  assert.equal((await expectError('POST', '/api/v1/baselines/oa-x', {}, 405, 'method_not_allowed')).headers.allow, 'GET, PUT, DELETE');
  assert.equal((await expectError('DELETE', '/api/v1/baselines', {}, 405, 'method_not_allowed')).headers.allow, 'GET');
});

test('GET /api/v1/sessions/{id}/regressions: JSON, text, csv; 400, 404, 405', async () => {
  const P = `/api/v1/sessions/${ids.test}/regressions`;
  const r = (await call('GET', `${P}?baseline=oa-main&rel=0&abs_us=0&abs_calls=0`, {}, 200)).body;
  assert.equal(r.base_session_id, ids.base);
  assert.ok(r.items.length > 0);
  assert.equal((await call('GET', P, {}, 200)).body.baseline, 'oa-main'); // picked by labels pair:cmp
  assert.match((await call('GET', `${P}?format=text`, {}, 200)).res.text, /^regressed: (yes|no) /);
  const csv = parseCsv((await call('GET', `${P}?baseline=oa-main&format=csv&rel=0&abs_us=0&abs_calls=0`, {}, 200)).res.text);
  assert.equal(csv.length - 1, r.items.length);
  // gate=memory (issue 51): the verdict's memory is validated against the document; these
  // sessions have no memory events, so it is null (not judged)
  const m = (await call('GET', `${P}?baseline=oa-main&gate=memory`, {}, 200)).body;
  assert.equal(m.gate, 'memory');
  assert.equal(m.verdict.memory, null);
  assert.match((await call('GET', `${P}?baseline=oa-main&gate=memory&format=text`, {}, 200)).res.text, /\ngate memory: /);
  await expectError('GET', `${P}?gate=memory&abs_bytes=-1`, {}, 400, 'invalid_parameter');
  await expectError('GET', `${P}?rel=-1`, {}, 400, 'invalid_parameter');
  await expectError('GET', `${P}?baseline=no-such`, {}, 404, 'not_found');
  await expectError('GET', `/api/v1/sessions/${ids.cpuOnly}/regressions`, {}, 404, 'not_found');
  await expectError('GET', '/api/v1/sessions/999999/regressions', {}, 404, 'not_found');
  assert.equal((await expectError('POST', P, {}, 405, 'method_not_allowed')).headers.allow, 'GET');
});

test('GET /api/v1/trends: JSON, text, csv; 400, 405', async () => {
  const r = (await call('GET', '/api/v1/trends?label=pair:cmp&operator=aten::add', {}, 200)).body;
  assert.deepEqual(r.points.map((p) => p.session_id), [ids.base, ids.test]);
  const u = (await call('GET', '/api/v1/trends?label=pair:cmp&metric=gpu_utilization', {}, 200)).body;
  assert.equal(u.points.length, 2);
  assert.match((await call('GET', '/api/v1/trends?label=pair:cmp&operator=aten::add&format=text', {}, 200)).res.text, /^session_id +created_at/);
  assert.equal(parseCsv((await call('GET', '/api/v1/trends?label=pair:cmp&operator=aten::add&format=csv', {}, 200)).res.text).length, 3);
  await expectError('GET', '/api/v1/trends?metric=bogus', {}, 400, 'invalid_parameter');
  await expectError('GET', '/api/v1/trends?metric=calls', {}, 400, 'invalid_parameter');
  assert.equal((await expectError('PUT', '/api/v1/trends', {}, 405, 'method_not_allowed')).headers.allow, 'GET');
});

// ---------------------------------------------------------------- misc

test('unknown /api/ routes are 404 not_found', async () => {
  await expectError('GET', '/api/v1/nope', {}, 404, 'not_found');
  await expectError('POST', '/api/v2/sessions', {}, 404, 'not_found');
  await expectError('GET', `/api/v1/sessions/${ids.base}/nope`, {}, 404, 'not_found');
});

test('POST /api/v1/sessions: 503 too_many_uploads while --max-uploads uploads are open', async () => {
  await new Promise((r) => setTimeout(r, 300)); // earlier uploads have released their slots
  const held = [];
  try {
    for (let i = 0; i < MAX_UPLOADS; i++) held.push(openUpload('/api/v1/sessions?name=held', 100000, '{"traceEvents":['));
    await new Promise((r) => setTimeout(r, 300)); // the server has read their headers and taken the slots
    await expectError('POST', '/api/v1/sessions', { body: '{"traceEvents":[]}' }, 503, 'too_many_uploads');
    await expectError('POST', `/api/v1/sessions/${ids.simpleAdd}/reanalyse`, {}, 503, 'too_many_uploads'); // a re-analysis takes a slot too
  } finally {
    for (const h of held) h.abort();
  }
  // The slots come back: an upload works again (within a second).
  let status = 0;
  for (let i = 0; i < 20 && status !== 201; i++) {
    await new Promise((r) => setTimeout(r, 50));
    const res = await request('POST', '/api/v1/sessions?name=after-503', { body: '[]' });
    validateResponse('POST', '/api/v1/sessions', res);
    status = res.status;
    if (status === 201) ids.after503 = JSON.parse(res.text).id;
  }
  assert.equal(status, 201);
  assert.deepEqual((await call('GET', '/api/v1/sessions?name=held', {}, 200)).body.sessions, [], 'a dropped upload leaves nothing');
});

test('DELETE /api/v1/sessions/{id}', async () => {
  const id = ids.chunked;
  await call('DELETE', `/api/v1/sessions/${id}`, {}, 204);
  await expectError('GET', `/api/v1/sessions/${id}`, {}, 404, 'not_found');
  for (const sub of ['operators', 'kernels', 'phases', 'gpu', 'report', 'timeline', 'trace'])
    await expectError('GET', `/api/v1/sessions/${id}/${sub}`, {}, 404, 'not_found');
  await expectError('DELETE', `/api/v1/sessions/${id}`, {}, 404, 'not_found');
  assert.ok(!(await call('GET', '/api/v1/sessions?limit=1000', {}, 200)).body.sessions.some((s) => s.id === id));
  await call('DELETE', `/api/v1/sessions/${ids.after503}`, {}, 204);
});

test('with --tokens-file: 401 without a token, 403 with a wrong one, on every write', async () => {
  const A = { base: process.env.FP_AUTH_URL };
  assert.ok(A.base, 'FP_AUTH_URL is not set (run.sh starts the token server)');
  const good = { Authorization: `Bearer ${process.env.FP_TOKEN}` };
  const bad = { Authorization: 'Bearer not-the-token-0000' };
  const body = trace(FILES.simpleAdd);
  const u401 = await expectError('POST', '/api/v1/sessions', { ...A, body }, 401, 'unauthorized');
  assert.match(u401.headers['www-authenticate'], /^Bearer realm="firstpass"/);
  await expectError('POST', '/api/v1/sessions', { ...A, body, headers: bad }, 403, 'forbidden');
  const id = (await call('POST', '/api/v1/sessions', { ...A, body, headers: good }, 201)).body.id;
  const R = `/api/v1/sessions/${id}/report`;
  const edit = JSON.stringify({ lines: { next_experiment: 'x' } });
  await expectError('PUT', R, { ...A, body: edit }, 401, 'unauthorized');
  await expectError('PUT', R, { ...A, body: edit, headers: bad }, 403, 'forbidden');
  await call('PUT', R, { ...A, body: edit, headers: good }, 200);
  await call('GET', R, A, 200); // reads stay open without --read-auth
  await expectError('DELETE', `/api/v1/sessions/${id}`, A, 401, 'unauthorized');
  await expectError('DELETE', `/api/v1/sessions/${id}`, { ...A, headers: bad }, 403, 'forbidden');
  await expectError('POST', `/api/v1/sessions/${id}/reanalyse`, A, 401, 'unauthorized');
  await expectError('POST', `/api/v1/sessions/${id}/reanalyse`, { ...A, headers: bad }, 403, 'forbidden');
  await call('DELETE', `/api/v1/sessions/${id}`, { ...A, headers: good }, 204);
});

// ---------------------------------------------------------------- operations

test('POST /api/v1/sessions/{id}/reanalyse: 200, 404, 409 while another runs, 405', async () => {
  const id = ids.simpleAdd;
  const before = (await call('GET', `/api/v1/sessions/${id}`, {}, 200)).body;
  const r = (await call('POST', `/api/v1/sessions/${id}/reanalyse`, {}, 200)).body;
  assert.equal(r.session_id, id);
  assert.equal(r.analysis_version, before.current_analysis_version);
  assert.equal(r.event_order, 'upload');
  const after = (await call('GET', `/api/v1/sessions/${id}`, {}, 200)).body;
  assert.deepEqual({ ...after, analysis_version: 0 }, { ...before, analysis_version: 0 }, 'the same session, figures and all');
  await expectError('POST', '/api/v1/sessions/987654321/reanalyse', {}, 404, 'not_found');
  await call('GET', `/api/v1/sessions/${id}/reanalyse`, {}, 405);
  // two at once on one session: one claims it, the other is told who holds it (409)
  let conflicts = 0;
  for (let round = 0; round < 10 && !conflicts; round++) {
    const rs = await Promise.all([0, 1, 2].map(() => call('POST', `/api/v1/sessions/${ids.nccl}/reanalyse`)));
    for (const { res, body } of rs) {
      if (res.status === 409) { conflicts++; assert.equal(body.error.code, 'conflict'); assert.match(body.error.message, /being re-analysed by/); }
      else assert.ok(res.status === 200 || res.status === 503, `${res.status} ${res.text.slice(0, 200)}`);
    }
  }
  assert.ok(conflicts > 0, 'no 409 in ten rounds of three at once');
});

test('GET /metrics', async () => {
  const { res } = await call('GET', '/metrics', {}, 200);
  assert.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/);
  assert.match(res.text, /^firstpass_sessions_stored \d+$/m);
  assert.match(res.text, /^firstpass_uploads_total\{result="accepted"\} [1-9]\d*$/m);
  await call('POST', '/metrics', {}, 405);
});

test('POST /api/v1/admin/backup: 201, 409 while one runs, 401/403 (token server: --backup-dir none)', async () => {
  const b = (await call('POST', '/api/v1/admin/backup', {}, 201)).body;
  assert.ok(b.bytes > 0 && b.sessions > 0, JSON.stringify(b));
  await call('GET', '/api/v1/admin/backup', {}, 405);
  // One backup at a time: fire several at once until two overlap (each takes milliseconds).
  let conflict = false;
  for (let round = 0; round < 10 && !conflict; round++) {
    const rs = await Promise.all(Array.from({ length: 8 }, () => call('POST', '/api/v1/admin/backup')));
    for (const { res, body } of rs) {
      assert.ok(res.status === 201 || res.status === 409, `${res.status} ${res.text.slice(0, 200)}`);
      if (res.status === 409) assert.equal(body.error.code, 'backup_running');
    }
    conflict = rs.some(({ res }) => res.status === 409);
  }
  assert.ok(conflict, 'no 409 in 10 rounds of 8 concurrent backups');
  const A = { base: process.env.FP_AUTH_URL };
  await expectError('POST', '/api/v1/admin/backup', A, 401, 'unauthorized');
  await expectError('POST', '/api/v1/admin/backup', { ...A, headers: { Authorization: 'Bearer not-the-token-0000' } }, 403, 'forbidden');
  await expectError('POST', '/api/v1/admin/backup', { ...A, headers: { Authorization: `Bearer ${process.env.FP_TOKEN}` } }, 403, 'backups_disabled');
});

// ---------------------------------------------------------------- serving agents and captures

test('agents, targets and captures: registration, the long poll, status reports, every refusal', async () => {
  const J = { 'Content-Type': 'application/json' };
  const json = (o) => ({ body: JSON.stringify(o), headers: J });
  const reg = { host: 'gpu-node-1', version: 'firstpass-upload/1', targets: [{ name: 'oa-vllm', engine: 'vllm', url: 'http://10.0.0.1:8000', dir: '/traces' },
    { name: 'oa-sglang', engine: 'sglang', url: 'http://10.0.0.1:30000', dir: '/traces/sglang' }] };
  const r = (await call('PUT', '/api/v1/agents/oa-agent', json(reg), 200)).body;
  assert.deepEqual(r.targets, ['oa-vllm', 'oa-sglang']);
  await expectError('PUT', '/api/v1/agents/oa-agent', json({ targets: [{ name: 'x', engine: 'tgi', url: 'http://a' }] }), 400, 'invalid_parameter');
  await expectError('PUT', '/api/v1/agents/oa-agent', { body: 'nope', headers: J }, 400, 'invalid_json');
  await call('GET', '/api/v1/agents/oa-agent', {}, 405);

  const t = (await call('GET', '/api/v1/targets', {}, 200)).body;
  assert.deepEqual(t.targets.map((x) => x.name), ['oa-sglang', 'oa-vllm']);
  assert.equal(t.targets[0].online, true);
  assert.match((await call('GET', '/api/v1/targets?format=text', {}, 200)).res.text, /^name +engine/);
  assert.match((await call('GET', '/api/v1/targets?format=csv', {}, 200)).res.text, /oa-vllm,vllm,http:\/\/10\.0\.0\.1:8000,oa-agent,true/);

  // a capture: queued, handed out by the poll once, then reported to its end
  const c = (await call('POST', '/api/v1/captures', json({ target: 'oa-sglang', steps: 10, options: { with_stack: false } }), 201));
  assert.equal(c.res.headers.location, `/api/v1/captures/${c.body.id}`);
  assert.equal(c.body.status, 'queued');
  await expectError('POST', '/api/v1/captures', json({ target: 'oa-sglang', seconds: 1 }), 409, 'conflict');
  const p = (await call('POST', '/api/v1/agents/oa-agent/poll?wait=0', {}, 200)).body;
  assert.equal(p.capture.id, c.body.id);
  assert.equal((await call('POST', '/api/v1/agents/oa-agent/poll?wait=1', {}, 200)).body.capture, null);
  await expectError('POST', '/api/v1/agents/oa-agent/poll?wait=26', {}, 400, 'invalid_parameter');
  await expectError('POST', '/api/v1/agents/oa-nobody/poll?wait=0', {}, 404, 'not_found');
  for (const st of ['running', 'flushing']) assert.equal((await call('POST', `/api/v1/captures/${c.body.id}/status`, json({ agent: 'oa-agent', status: st }), 200)).body.status, st);
  await expectError('POST', `/api/v1/captures/${c.body.id}/status`, json({ agent: 'oa-agent', status: 'running' }), 409, 'conflict');
  await expectError('POST', `/api/v1/captures/${c.body.id}/status`, json({ agent: 'oa-agent', status: 'half' }), 400, 'invalid_parameter');
  await expectError('POST', '/api/v1/captures/999999/status', json({ agent: 'oa-agent', status: 'failed' }), 404, 'not_found');
  const f = (await call('POST', `/api/v1/captures/${c.body.id}/status`, json({ agent: 'oa-agent', status: 'failed', error: 'sglang /stop_profile: HTTP 500: Internal Server Error' }), 200)).body;
  assert.equal(f.error, 'sglang /stop_profile: HTTP 500: Internal Server Error');
  assert.ok(f.finished_at);
  assert.equal((await call('GET', `/api/v1/captures/${c.body.id}`, {}, 200)).body.status, 'failed');
  await expectError('GET', '/api/v1/captures/999999', {}, 404, 'not_found');

  // refusals of POST /api/v1/captures
  await expectError('POST', '/api/v1/captures', json({ target: 'oa-none', seconds: 1 }), 404, 'not_found');
  await expectError('POST', '/api/v1/captures', json({ target: 'oa-vllm', seconds: 100000 }), 400, 'invalid_parameter');
  await expectError('POST', '/api/v1/captures', json({ target: 'oa-vllm', steps: 5 }), 400, 'invalid_parameter');
  await expectError('POST', '/api/v1/captures', { body: '[]', headers: J }, 400, 'invalid_json');
  // --captures-per-hour (6): five more on oa-sglang, each ended by its agent, then a 429
  for (let i = 0; i < 5; i++) {
    const x = (await call('POST', '/api/v1/captures', json({ target: 'oa-sglang', seconds: 1 }), 201)).body;
    await call('POST', `/api/v1/captures/${x.id}/status`, json({ agent: 'oa-agent', status: 'uploaded' }), 200);
  }
  await expectError('POST', '/api/v1/captures', json({ target: 'oa-sglang', seconds: 1 }), 429, 'rate_limited');
  const list = (await call('GET', '/api/v1/captures?target=oa-sglang&limit=3', {}, 200)).body;
  assert.equal(list.captures.length, 3);
  assert.ok(list.captures[0].id > list.captures[1].id, 'newest first');
  assert.match((await call('GET', '/api/v1/captures?format=text', {}, 200)).res.text, /^id +target +engine +status/);
  assert.match((await call('GET', '/api/v1/captures?format=csv', {}, 200)).res.text, /^id,target,engine,status/);
  await expectError('GET', '/api/v1/captures?limit=0', {}, 400, 'invalid_parameter');
  await call('DELETE', '/api/v1/captures', {}, 405);

  // cancel (issue 50): a capture in flight becomes cancelled; its agent's poll lists it
  const k = (await call('POST', '/api/v1/captures', json({ target: 'oa-vllm', seconds: 1 }), 201)).body;
  assert.equal((await call('POST', '/api/v1/agents/oa-agent/poll?wait=0', {}, 200)).body.capture.id, k.id);
  assert.equal((await call('POST', `/api/v1/captures/${k.id}/cancel`, {}, 200)).body.status, 'cancelled');
  assert.ok((await call('POST', '/api/v1/agents/oa-agent/poll?wait=0', {}, 200)).body.cancelled.includes(k.id));
  assert.equal((await call('POST', `/api/v1/captures/${k.id}/status`, json({ agent: 'oa-agent', status: 'running' }), 200)).body.status, 'cancelled');
  await expectError('POST', `/api/v1/captures/${k.id}/cancel`, {}, 409, 'conflict');
  await expectError('POST', '/api/v1/captures/999999/cancel', {}, 404, 'not_found');
  await call('GET', `/api/v1/captures/${k.id}/cancel`, {}, 405);
  // another agent may not take a live agent's target; the targets are paged
  await expectError('PUT', '/api/v1/agents/oa-agent2', json({ targets: [{ name: 'oa-vllm', engine: 'vllm', url: 'http://10.0.0.2:8000' }] }), 409, 'conflict');
  const pg = (await call('GET', '/api/v1/targets?offset=1&limit=1', {}, 200)).body;
  assert.deepEqual([pg.total, pg.targets.map((x) => x.name)], [2, ['oa-vllm']]);
  await expectError('GET', '/api/v1/targets?limit=0', {}, 400, 'invalid_parameter');
  for (const [m, path] of [['POST', '/api/v1/targets'], ['PUT', `/api/v1/captures/${c.body.id}`], ['GET', `/api/v1/captures/${c.body.id}/status`],
    ['GET', '/api/v1/agents/oa-agent/poll']]) await call(m, path, {}, 405);

  // with --tokens-file: every write needs a token
  const A = { base: process.env.FP_AUTH_URL };
  await expectError('POST', '/api/v1/captures', { ...A, ...json({ target: 'x', seconds: 1 }) }, 401, 'unauthorized');
  await expectError('POST', '/api/v1/captures', { ...A, body: '{}', headers: { ...J, Authorization: 'Bearer not-the-token-0000' } }, 403, 'forbidden');
  await expectError('PUT', '/api/v1/agents/a', { ...A, ...json(reg) }, 401, 'unauthorized');
  await expectError('POST', '/api/v1/agents/a/poll', { ...A }, 401, 'unauthorized');
  await expectError('POST', '/api/v1/captures/1/status', { ...A, ...json({}) }, 401, 'unauthorized');
  await expectError('POST', '/api/v1/captures/1/cancel', { ...A }, 401, 'unauthorized');
  await expectError('POST', '/api/v1/captures/1/cancel', { ...A, headers: { Authorization: 'Bearer not-the-token-0000' } }, 403, 'forbidden');
});

// ---------------------------------------------------------------- Idempotency-Key (issue 50)

test('POST /api/v1/sessions with Idempotency-Key: 409 while one is in flight, then 201, then 200 with its reply', async () => {
  const body = trace(FILES.base);
  const key = { 'Idempotency-Key': 'oa-file-0001' };
  const sleep = (ms) => new Promise((s) => setTimeout(s, ms));
  const open = openUpload('/api/v1/sessions', body.length, body.subarray(0, 100), key);
  let r;
  for (let i = 0; i < 100; i++) { // until the open upload's head is in (a cut body: it never stores)
    r = await call('POST', '/api/v1/sessions', { body: '{"traceEvents": [', headers: key });
    if (r.res.status === 409) break;
    await sleep(100);
  }
  assert.equal(r.body.error.code, 'conflict');
  assert.ok(Number(r.res.headers['retry-after']) >= 1);
  open.abort(); // a dropped upload releases its key
  let first;
  for (let i = 0; i < 100; i++) {
    first = await call('POST', '/api/v1/sessions', { body, headers: key });
    if (first.res.status !== 409) break;
    await sleep(100);
  }
  assert.equal(first.res.status, 201);
  const again = await call('POST', '/api/v1/sessions', { body, headers: { 'Idempotency-Key': '"oa-file-0001"' } }, 200);
  assert.deepEqual(again.body, first.body);
  await call('DELETE', `/api/v1/sessions/${first.body.id}`, {}, 204);
  await expectError('POST', '/api/v1/sessions', { body, headers: { 'Idempotency-Key': 'a b' } }, 400, 'invalid_parameter');
});

test('every documented response (5xx faults aside) was exercised', () => {
  const missing = documentedResponses().filter((k) => !seen.has(k));
  assert.deepEqual(missing, [], 'documented but never seen from the server');
});
