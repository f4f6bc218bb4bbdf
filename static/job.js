// job.js: the jobs list (job.html) and one job's ranks side by side (job.html?job=NAME),
// from GET /api/v1/jobs and /api/v1/jobs/{job}. The straggler's row is marked; every number
// is the API's, formatted.
'use strict';
(() => {
  const { api, el, fmtTime, fmtPct, fmtInt, renderTable, nextSort } = FP;
  const job = FP.param('job');

  async function showList() {
    const j = await api('/api/v1/jobs');
    const cols = [
      { key: 'job', label: 'Job', rowHeader: true, value: (r) => r.job,
        render: (r) => el('a', { href: 'job.html?job=' + encodeURIComponent(r.job) }, r.job) },
      { key: 'sessions', label: 'Sessions', num: true, value: (r) => r.sessions, render: (r) => fmtInt(r.sessions) },
      { key: 'ranks', label: 'Ranks', num: true, value: (r) => r.ranks, render: (r) => fmtInt(r.ranks) },
      { key: 'newest_session_id', label: 'Newest session', num: true, value: (r) => r.newest_session_id,
        render: (r) => el('a', { href: 'session.html?id=' + r.newest_session_id }, '#' + r.newest_session_id) },
    ];
    let state = { key: 'newest_session_id', dir: 'descending', clientSort: true };
    const draw = () => renderTable(document.getElementById('jobs'), cols, j.jobs, state, (k) => { state = nextSort(state, k, cols); draw(); });
    draw();
  }

  async function showJob() {
    document.getElementById('title').textContent = 'Job ' + job;
    document.title = `Job ${job} · firstpass`;
    document.getElementById('list-sec').hidden = true;
    document.getElementById('job-sec').hidden = false;
    const j = await api('/api/v1/jobs/' + encodeURIComponent(job));
    const s = j.straggler;
    const isStrag = (r) => s && r.session_id === s.session_id;
    // the straggler's step range: ProfilerStep* (any step), or its most repeated CPU range
    function stragSteps() {
      const r = j.ranks.find(isStrag);
      return r && r.steps && r.steps.range ? r.steps.range : 'ProfilerStep*';
    }
    // the verdict only beyond the steps' own spread (issue 51, item 4): the server's noise
    // bound is twice the standard error of the difference of the mean steps
    const c = j.straggler_check;
    const noise = (x) => (x.noise_us === null || x.noise_us === undefined
      ? ' The noise bound is unknown (these steps are a repeated range, with no per-step times), so this is the largest difference, not a tested one.'
      : ` That is beyond the steps' own spread: ${fmtTime(x.own_per_step_us - x.others_median_us)} more against a noise bound of ±${fmtTime(x.noise_us)}.`);
    document.getElementById('straggler').replaceChildren(s
      ? el('p', { class: 'callout', id: 'straggler-text', dataset: { verdict: s.verdict || '' } },
        `Straggler: rank ${s.rank} (session #${s.session_id}), ${fmtPct(s.slower_by, 0)} more time of its own per step ` +
        `(${fmtTime(s.own_per_step_us)} against a median of ${fmtTime(s.others_median_us)}; its steps ${fmtTime(s.step_mean_us)})` +
        (s.differs.length ? `; it has more ${s.differs.map((d) => d.category.replace(/_/g, ' ')).join(', ')}` : '') + '.' + noise(s) + ' ',
        // into the straggler's trace: its first step, selected (issue 51, item 3)
        el('a', { id: 'straggler-timeline', class: 'tl-link', href: FP.timelineHref(s.session_id, { find: stragSteps() }) }, 'See its first step in the timeline'))
      : c ? el('p', { class: 'note', id: 'straggler-text', dataset: { verdict: c.verdict } },
        `No straggler beyond the steps' own spread: rank ${c.rank} has the most time of its own per step, ${fmtTime(c.own_per_step_us - c.others_median_us)} ` +
        `(${fmtPct(c.slower_by, 0)}) more than the others' median, within the noise bound of ±${fmtTime(c.noise_us)} (twice the standard error of the difference of the mean steps).`)
        : el('p', { class: 'muted' }, 'No straggler: fewer than two ranks have steps.'));
    // each rank's mean step, split: compute, communication beside it, communication alone, idle
    const SPLIT = ['compute', 'overlapped_comm', 'exposed_comm', 'idle'];
    const SPLIT_COLORS = { compute: '#59a14f', overlapped_comm: '#76b7b2', exposed_comm: '#e15759', idle: '#bab0ac' };
    const split = j.ranks.filter((r) => r.breakdown);
    document.getElementById('split-note').textContent = split.length
      ? 'Compute: kernels, copies and memsets with no collective beside them; overlapped communication: collective kernels running beside compute; ' +
        'exposed communication: collectives with nothing else on the GPU (and the host\'s collective ranges); idle: the rest of the step (runtime, data loading, CPU).'
      : 'No rank has a ProfilerStep breakdown (its steps are a repeated range): no split to draw.';
    document.getElementById('split-chart').replaceChildren(...(split.length ? [
      FPC.stacked(split.map((r) => ({ label: `rank ${r.rank === null ? '?' : r.rank}`, title: `rank ${r.rank} (session #${r.session_id})`,
        parts: Object.fromEntries(SPLIT.map((k) => [k, r.breakdown[`${k}_us`] || 0])) })), SPLIT, SPLIT_COLORS, fmtTime, { label: 'Mean step by rank' }),
      FPC.legend(SPLIT, SPLIT_COLORS)] : []));
    const cols = [
      { key: 'rank', label: 'Rank', num: true, rowHeader: true, value: (r) => r.rank, render: (r) => (r.rank === null ? '—' : String(r.rank)) },
      { key: 'session', label: 'Session', value: (r) => r.session_id,
        render: (r) => el('a', { href: 'session.html?id=' + r.session_id }, `#${r.session_id} ${r.name}`) },
      { key: 'steps', label: 'Steps', num: true, value: (r) => (r.steps ? r.steps.count : null),
        render: (r) => (r.steps ? `${fmtInt(r.steps.count)} × ${r.steps.range}` : '—') },
      { key: 'mean', label: 'Step mean', num: true, value: (r) => (r.steps ? r.steps.mean_us : null),
        render: (r) => (r.steps ? fmtTime(r.steps.mean_us) : '—') },
      { key: 'sd', label: 'Step spread (sd)', num: true, value: (r) => (r.steps && r.steps.sd_us !== undefined ? r.steps.sd_us : null),
        render: (r) => (r.steps && r.steps.sd_us !== undefined ? fmtTime(r.steps.sd_us) : '—') },
      { key: 'idle', label: 'GPU idle', num: true, value: (r) => r.gpu_idle_fraction,
        render: (r) => (r.gpu_idle_fraction === null ? 'no GPU' : fmtPct(r.gpu_idle_fraction)) },
      { key: 'top', label: 'Top suspect', value: (r) => (r.top_suspect ? r.top_suspect.category : ''),
        // the culprit shortened (whole on hover): a long one pushed the Straggler column off a 1440 px screen
        render: (r) => (r.top_suspect ? [`${r.top_suspect.category.replace(/_/g, ' ')}: `, FP.nameEl(r.top_suspect.culprit, FP.shortName(r.top_suspect.culprit, 32))] : 'none') },
      { key: 'comm', label: 'Communication at stake', num: true, value: (r) => (r.communication ? r.communication.at_stake_us : null),
        render: (r) => (r.communication ? fmtTime(r.communication.at_stake_us) : '—') },
      // the collective kernels' time and how much of it ran beside other GPU work (issue 42,
      // item 9: the API had it, the page did not)
      { key: 'comm_kernel', label: 'Collective kernels', num: true, value: (r) => (r.communication ? r.communication.kernel_us : null),
        render: (r) => (r.communication && r.communication.kernel_us !== null ? fmtTime(r.communication.kernel_us) : '—') },
      { key: 'overlap', label: 'Overlapped with compute', num: true,
        value: (r) => (r.communication && r.communication.kernel_us ? r.communication.overlap_us / r.communication.kernel_us : null),
        render: (r) => (r.communication && r.communication.overlap_us !== null && r.communication.kernel_us
          ? `${fmtTime(r.communication.overlap_us)} (${fmtPct(r.communication.overlap_us / r.communication.kernel_us)})` : '—') },
      { key: 'strag', label: 'Straggler', value: (r) => (isStrag(r) ? 1 : 0), render: (r) => (isStrag(r) ? 'yes' : ''),
        cls: (r) => (isStrag(r) ? 'slower' : null) },
    ];
    let state = { key: 'rank', dir: 'ascending', clientSort: true };
    const draw = () => renderTable(document.getElementById('ranks'), cols, j.ranks, state, (k) => { state = nextSort(state, k, cols); draw(); });
    draw();
    // the collectives (issue 51, item 4): calls, bytes, kernel time, algbw and busbw
    const colls = j.collectives || [];
    document.getElementById('coll-note').textContent = colls.length
      ? 'From the NCCL kernels\' own args (Collective name, message size, dtype, group size). Bytes: nccl-tests\' S (the output for all-gather, ' +
        'the input otherwise); algorithm bandwidth: bytes over kernel time; bus bandwidth: algbw × 2(n−1)/n for all-reduce, × (n−1)/n for all-gather, ' +
        'reduce-scatter and all-to-all, × 1 otherwise, n the group size.'
      : 'No collective kernel with its sizes in these ranks (NCCL kernels carry them in PyTorch 2.2 and later; gloo runs on the CPU).';
    const gbps = (v) => (v === null || v === undefined ? '—' : `${v.toFixed(v < 10 ? 2 : 1)} GB/s`);
    const ccols = [
      { key: 'collective', label: 'Collective', rowHeader: true, value: (c) => c.collective },
      { key: 'group_size', label: 'Group size', num: true, value: (c) => c.group_size, render: (c) => (c.group_size === null ? '—' : fmtInt(c.group_size)) },
      { key: 'ranks', label: 'Ranks', num: true, value: (c) => c.ranks, render: (c) => fmtInt(c.ranks) },
      { key: 'calls', label: 'Calls', num: true, value: (c) => c.calls, render: (c) => fmtInt(c.calls) },
      { key: 'bytes', label: 'Bytes', num: true, value: (c) => c.bytes, render: (c) => (c.bytes === null ? '—' : FP.fmtMem(c.bytes)) },
      { key: 'time_us', label: 'Kernel time', num: true, value: (c) => c.time_us, render: (c) => fmtTime(c.time_us) },
      { key: 'algbw_gbps', label: 'Algorithm bandwidth', num: true, value: (c) => c.algbw_gbps, render: (c) => gbps(c.algbw_gbps), csv: (c) => c.algbw_gbps, csvUnit: 'GB/s' },
      { key: 'busbw_gbps', label: 'Bus bandwidth', num: true, value: (c) => c.busbw_gbps, render: (c) => gbps(c.busbw_gbps), csv: (c) => c.busbw_gbps, csvUnit: 'GB/s' },
    ];
    let cstate = { key: 'time_us', dir: 'descending', clientSort: true };
    const cdraw = () => renderTable(document.getElementById('collectives'), ccols, colls, cstate, (k) => { cstate = nextSort(cstate, k, ccols); cdraw(); },
      'No collective kernels with sizes.');
    cdraw();
    const ranks = j.ranks.map((r) => r.rank);
    const pcols = [{ key: 'name', label: 'Phase', rowHeader: true, value: (p) => p.name }].concat(ranks.map((rk, i) => ({
      key: 'r' + i, label: `Rank ${rk === null ? '?' : rk}`, num: true,
      value: (p) => { const x = p.ranks.find((y) => y.session_id === j.ranks[i].session_id); return x ? x.mean_us : null; },
      render: (p) => { const x = p.ranks.find((y) => y.session_id === j.ranks[i].session_id); return x ? `${fmtTime(x.mean_us)} ×${x.count}` : '—'; },
    })));
    let pstate = { key: 'name', dir: 'ascending', clientSort: true };
    const pdraw = () => renderTable(document.getElementById('phases'), pcols, j.phases, pstate, (k) => { pstate = nextSort(pstate, k, pcols); pdraw(); });
    pdraw();
  }

  (job ? showJob() : showList()).catch(() => { /* the banner shows it */ });
})();
