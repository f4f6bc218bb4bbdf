-- scratch.sql: the schema of an upload's scratch databases (attached as "scratch",
-- "kscratch", for the kernel rows alone, and "wscratch", for what the walk writes: see their
-- tables below).
--
-- Three scratch files per upload, on local disk ($TMPDIR, lib/tmpfile.h), deleted when the
-- upload ends: the loader (ingest/load.c) fills it while the body streams in, the analysis
-- (analysis/analyze.c) reads it and leaves its result tables in it, and the commit
-- (store/commit.c) copies those into the main database in one transaction. Nothing in it
-- outlives the upload, so it has no migrations. The build embeds this file: each section
-- below becomes a C string scratch_<name>_sql (build/gen/scratch_sql.h).
--
-- Invariants (asserted where they are relied on, analysis/trace.h):
--   ev.te = ev.ts + ev.dur; ev.cls is enum ev_class (lib/chunk.h); ev.seq numbers the
--   analysed events in file order; every string column of ev and every hrec field that
--   names a string is an id of the upload's string table (trace_ctx.strs).

-- @load  (loader_new: before the first event)
PRAGMA scratch.journal_mode=OFF;
PRAGMA scratch.synchronous=OFF;
PRAGMA scratch.cache_size=-15360;
PRAGMA kscratch.journal_mode=OFF;
PRAGMA kscratch.synchronous=OFF;
PRAGMA wscratch.journal_mode=OFF;
PRAGMA wscratch.synchronous=OFF;
PRAGMA wscratch.cache_size=-1024;
-- bps, occ: a kernel's "blocks per SM" and "est. achieved occupancy %" (trace.h: gpu_agg),
-- NULL when it has none (effic.c reads them with its launches, through ev_gpu).
-- One row per analysed event that a query joins, groups or seeks (GPU activity,
-- gpu_user_annotation, runtime calls by correlation, user_annotation ranges).
CREATE TABLE scratch.ev(seq INTEGER PRIMARY KEY, cls INT NOT NULL, kind INT NOT NULL,
 name INT NOT NULL, track INT NOT NULL, ts REAL NOT NULL, te REAL NOT NULL, dur REAL NOT NULL, corr INT,
 dev INT, stream INT, bytes INT, devtype INT, shapes INT, grid INT, block INT, regs INT, smem INT,
 bps REAL, occ REAL);
-- The user_annotation (cls 0) and gpu_user_annotation (cls 4) rows of ev again, in file
-- order (rowid): the phases' queries read these few rows here. Why: each found them by a
-- scan of every row of ev (no index of ev has them, and building one scans ev too): the
-- GPU phases, the timeline's bands, each CPU phase of the step breakdown, 14 + 8 ms of
-- the request thread on the flat shape at 100 MB, 34 + 17 ms on the many-names shape.
CREATE TABLE scratch.ann(cls INT NOT NULL, kind INT NOT NULL, name INT NOT NULL, dev INT, ts REAL NOT NULL,
 te REAL NOT NULL, dur REAL NOT NULL);
-- Each track's host-class events, HBLK_RECS hrecs a row, in file order (trace.h).
CREATE TABLE scratch.hblk(track INT NOT NULL, n INT NOT NULL, data BLOB NOT NULL);
-- The event chunks of the session (lib/chunk.h), as the commit copies them.
CREATE TABLE scratch.chunks(track INT NOT NULL, seq INT PRIMARY KEY, n INT NOT NULL,
 min_ts REAL NOT NULL, max_end REAL NOT NULL, data BLOB NOT NULL, drawn INT NOT NULL, gpu INT NOT NULL);

-- The kernel rows' scratch file (kscratch: load.c attaches it next to scratch), which
-- gpurows.c's job writes on its own connection while this one writes scratch: SQLite has
-- one writer a file. Its tables, made here, before the job starts:
-- kern: the kernel table (store/schema.sql), in kernels_session's order (total_us DESC);
-- gpu_ops: the operator table's GPU rows (grouping 2, the columns of op_rows), in
-- operators_session's order; their walk is their place in (cls, kind, name) order, after
-- every row of op_rows in the report's ties.
CREATE TABLE kscratch.kern(name_id INT, kind TEXT, calls INT, total_us REAL, min_us REAL, max_us REAL, grid_id INT,
 block_id INT, regs INT, smem INT, mean_bps REAL, mean_occ REAL, mean_sme REAL);
CREATE TABLE kscratch.gpu_ops(grouping INT, name_id INT, kind TEXT, shapes_id INT, calls INT, cpu_total REAL,
 self_cpu REAL, cuda_total REAL, self_cuda REAL, cpu_mem INT, self_cpu_mem INT, cuda_mem INT, self_cuda_mem INT,
 walk INT NOT NULL);
-- As scratch.ops: the GPU rows with their texts, for the report (fp_str exists once the
-- analysis starts; a view is resolved when a statement reads it).
CREATE VIEW kscratch.ops AS SELECT o.grouping, fp_str(o.name_id) AS name, o.kind, '' AS input_shapes,
 o.calls, o.cpu_total, o.self_cpu, o.cuda_total, o.self_cuda, o.cpu_mem, o.self_cpu_mem, o.cuda_mem, o.self_cuda_mem, o.walk
 FROM gpu_ops o;

-- @analysis  (analyze_run: after the last event, once the host ops of GPU tracks are in ev)
-- Why partial indexes: building an index sorts its rows, and the three over every event
-- were most of setup (276 of 342 ms at 100 MB). Each query that needs one names its
-- index's WHERE term literally (cls = 2; a comparison on corr implies corr IS NOT NULL),
-- which is what lets SQLite use a partial index; the rest scan ev once. Why the extra
-- columns: they cover what the GPU passes, the busy merges, GCUR_SQL and the launch delays
-- read, so those never look a row up in ev by rowid, which is a random read of a file
-- larger than the page cache (their queries took 99 ms at 100 MB with lookups, 49 without).
CREATE INDEX scratch.ev_corr ON ev(corr, cls, ts, dur, kind, name, track) WHERE corr IS NOT NULL;
-- ev_gpu's corr comes right after ts: the idle gaps read each device by (ts, corr), the
-- activity a gap ends in, and with corr third the index gives that order whole; with it
-- last, SQLite sorted each run of equal ts (a temp B-tree for the right part of the ORDER
-- BY): idle_gaps 131 -> 113 ms on the flat shape, 239-283 -> 205-243 ms on names.
-- Why cls last, though the WHERE fixes it: SQLite 3.40 counts a partial index as covering
-- only when it holds every column the query names, and each query names cls = 2 (to use
-- the index at all); without cls, EXPLAIN QUERY PLAN said "USING INDEX", not "COVERING",
-- and each row paid a deferred seek (OP_DeferredSeek, sqlite3VdbeIdxRowid): 44M
-- instructions a flat upload at 30 MB. ev_gpu_ts holds it for that too.
-- bps and occ come last for effic.c's pass over the kernels (it reads them with dev, ts, te
-- and kind, covered); name after them for waste.c's pass and the suspects' GPU sweeps
-- (comm_exposed, pageable): without it each of their rows paid a lookup in ev (callgrind,
-- llm shape at 20 MB: waste pass 27.6M -> 23.6M instructions, comm sweep 36.7M -> 33.3M).
CREATE INDEX scratch.ev_gpu ON ev(dev, ts, corr, te, stream, dur, kind, cls, bps, occ, name) WHERE cls = 2;
CREATE INDEX scratch.hblk_track ON hblk(track);
-- The merged GPU busy intervals, BUSY_BLOCK of them a row (analyze.c): all activity, kernels only.
CREATE TABLE scratch.busy(s0 REAL PRIMARY KEY, data BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE scratch.kbusy(s0 REAL PRIMARY KEY, data BLOB NOT NULL) WITHOUT ROWID;
-- The walk's file (wscratch) from here on: what the analysis writes once its jobs read
-- scratch on their own connections. Why a third file: a write transaction whose dirty pages
-- outgrow the cache spills them and holds its file's exclusive lock until it commits; in
-- scratch, that lock stopped the jobs' reads (a 1 GB trace: the GPU job waited 1.1 s, the
-- walk's own steps 0.5 s, each for the other). SQLite locks a file, not a connection, so a
-- spill of wscratch blocks no one. Its cache is small, and part of the upload's page cache
-- budget (load.c: set_share): no one else reads it.
-- The analysis's results, as the commit copies them (store/schema.sql has their meaning).
-- Names, shapes, grids and blocks are ids of the upload's string table (*_id columns,
-- NULL for none), as in the main database: a text is stored once however many rows name
-- it (issue 22: one 1 MiB shapes string shared by N operators was N MiB).
-- op_rows: the walk's rows, grouping 0 by name, 1 by name and shapes (store/schema.sql; the GPU
-- rows, grouping 2, are kscratch.gpu_ops); written in the order of the main database's
-- operators_session index (an_write_ops); walk is the row's place in the walk, the tie-break
-- that keeps the report's top lists as they were in walk order (report.c). The commit does
-- not copy it.
CREATE TABLE wscratch.op_rows(grouping INT, name_id INT, kind TEXT, shapes_id INT, calls INT, cpu_total REAL,
 self_cpu REAL, cuda_total REAL, self_cuda REAL, cpu_mem INT, self_cpu_mem INT, cuda_mem INT, self_cuda_mem INT,
 walk INT NOT NULL);
-- The operator table with its texts (fp_str: analyze.c), as the report (report.c) reads it.
CREATE VIEW wscratch.ops AS SELECT o.grouping, fp_str(o.name_id) AS name, o.kind, COALESCE(fp_str(o.shapes_id), '') AS input_shapes,
 o.calls, o.cpu_total, o.self_cpu, o.cuda_total, o.self_cuda, o.cpu_mem, o.self_cpu_mem, o.cuda_mem, o.self_cuda_mem, o.walk
 FROM op_rows o;
CREATE TABLE wscratch.ph(name_id INT, kind TEXT, count INT, total_us REAL, gpu_busy_us REAL, kernels INT,
 kernel_us REAL, first_ts REAL);
CREATE TABLE wscratch.tlb(track INT, data BLOB);
-- The idle gaps of every device (idle.c): cls 0 other (track -1), 1 host wait, 2 kernel wait;
-- track and lts are the launch's thread and start, corr its correlation; b0 the start of the
-- device's busy run that the gap ends (a call that started after it waited for the device).
CREATE TABLE wscratch.igap(dev INT, track INT, cls INT, g0 REAL, g1 REAL, lts REAL, corr INT, b0 REAL);
-- With one device, its gaps (every class but the lead-in and tail) as runs (runs.c: up to
-- RUN_BLOCK_BYTES of records a row, id = key << 32 | the block's number): gstream, key 0,
-- every gap in time order (gap_rec, an.h); kwruns, key the launching thread, its kernel-wait
-- gaps in launch order (kw_rec). igap then holds only cls 1, 3 and 4, and cls 2 too when a
-- thread's do not come in launch order (idle.c).
CREATE TABLE wscratch.gstream(id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE wscratch.kwruns(id INTEGER PRIMARY KEY, data BLOB NOT NULL);
-- The instances of the host phases (host.c), pid an index into A.phases: idle per phase.
CREATE TABLE wscratch.pinst(pid INT, ts REAL, te REAL);
-- The [memory] events in walk order (memory.c): Device Type, Device Id, time, bytes (+ alloc, - free),
-- the allocator's Total Allocated / Total Reserved after the event (-1: the event has none).
CREATE TABLE wscratch.mem(devtype INT, dev INT, ts REAL, bytes INT, total_alloc INT, total_reserved INT);
-- CPU-only traces: every labelled piece of every thread, by category (an.h CSEG_*), seq
-- numbering a (category, thread)'s blocks; data is up to CSEG_BLOCK cseg_pieces (an.h: start,
-- end, name id), the thread's in start order (cseg.c has why).
CREATE TABLE wscratch.cseg(cat INT NOT NULL, track INT NOT NULL, seq INT NOT NULL, data BLOB NOT NULL,
 PRIMARY KEY (cat, track, seq)) WITHOUT ROWID;
-- Launches made under a copy/cast op (suspects.c: copy_on_critical_path's culprit): correlation, the outermost such op.
CREATE TABLE wscratch.ccorr(corr INT PRIMARY KEY, op INT) WITHOUT ROWID;

-- @devices  (analyze_run: only when GPU events name more than one device)
CREATE INDEX scratch.ev_gpu_ts ON ev(ts, te, kind, cls, name) WHERE cls = 2;
