// The Human Gate page, one Home: PRs over time, branches, checkpoints, history of main, then the recycle area a page
// at a time (a real one holds hundreds of entries). Loaded before app.js, whose helpers (h, api, get, show, ...) it uses.
'use strict';

const TRASH_PER_PAGE = 25;

/** What a person set in the recycle area (page, filters, search), kept across the redraws that keep the page current. */
const recycleKept = { page: 0, from: '', into: '', search: '' };
let watched = null;

/** A Home's page, kept current: drawn again when its PRs, branches, checkpoints or recycle area change. */
async function homePage(role) {
  await drawHome(role);
  if (watched === role) return;
  watched = role;
  const r = enc(role);
  let queued = false;
  // Not while a person types in the recycle area's search or picks from its lists: once they leave it.
  const busy = () => !!document.activeElement?.closest?.('.recycle-bar');
  const redraw = () => {
    if (busy()) return setTimeout(redraw, POLL_MS);
    queued = false;
    drawHome(role).catch((err) => notice(err.message));
  };
  // Each poll's first answer is what was just drawn.
  const onChange = () => {
    let seen = false;
    return () => {
      if (seen && !queued) {
        queued = true;
        setTimeout(redraw, 200);
      }
      seen = true;
    };
  };
  live(`/v1/homes/${r}/prs`, onChange());
  live(`/v1/homes/${r}/branches`, onChange());
  live(`/v1/homes/${r}/checkpoints`, onChange());
  live(`/v1/homes/${r}/trash`, onChange());
}

async function drawHome(role) {
  document.title = `${role} · Agent NAS`;
  const r = enc(role);
  const [branches, trash, checkpoints, log, prs, stats, cluster] = await Promise.all([
    get(`/v1/homes/${r}/branches`), get(`/v1/homes/${r}/trash`), get(`/v1/homes/${r}/checkpoints`),
    api('POST', `/v1/homes/${r}/log`, { limit: 20 }).then((x) => x.result), get(`/v1/homes/${r}/prs`), get(`/v1/homes/${r}/prs/stats`),
    // On a host of a cluster: whether this host's main is the one the Home's writer published (null alone).
    get('/v1/cluster').catch(() => null),
  ]);
  const here = cluster?.homes.find((x) => x.role === role);
  show(
    h('p', { class: 'crumbs' }, h('a', { href: '/' }, 'Decisions'), ` / ${role}`),
    h('h1', {}, role),
    here && !here.current ? h('p', { class: 'notice warn' }, `main as of ${log[0]?.time ?? 'its last fetch'} on this host (${cluster.host}): ` +
      `it trails the main the Home's writer published ${here.published ?? ''}${cluster.etcd.ok ? '' : '; etcd is out of reach'}`) : null,
    here ? h('p', { class: 'muted' }, `host ${cluster.host} · merge writer ${here.writer ?? '(none yet)'}`) : null,
    section('PRs over time', prChart(prs, stats)),
    section(`Branches (${branches.length})`, branches.length === 0 ? h('p', { class: 'muted' }, 'no branches') : h('table', {},
      h('thead', {}, h('tr', {}, ['branch', 'head', 'expires', 'pending', 'quota used', 'versioned', 'scratch'].map((x) => h('th', {}, x)))),
      h('tbody', {}, branches.map((b) => h('tr', {},
        h('td', {}, h('code', {}, b.name), b.run ? h('span', { class: 'flag' }, `run ${b.run}`) : null,
          b.host ? h('span', { class: 'flag', title: 'held by another host: read-only here, at its last pushed head' }, `on host ${b.host}`) : null,
          b.merged ? h('span', { class: 'flag merged', title: `removed after the Home's merged_branch_grace` }, `merged · PR ${b.merged.pr}`) : null),
        h('td', {}, h('code', {}, short(b.head))),
        h('td', { class: b.expired ? 'warn' : '', title: b.expires }, b.host ? '–' : until(b.expires)), h('td', { class: 'num' }, String(b.pending)),
        h('td', { class: 'num' }, b.quota ? `${size(b.quota.used)} of ${size(b.quota.limit)}` : '–'),
        h('td', { class: 'num' }, size(b.bytes?.versioned)), h('td', { class: 'num' }, size(b.bytes?.scratch))))))),
    section(`Checkpoints (${checkpoints.length})`, checkpoints.length === 0 ? h('p', { class: 'muted' }, 'none') : h('table', {},
      h('thead', {}, h('tr', {}, ['name', 'of', 'commit', 'by', 'when', 'message'].map((x) => h('th', {}, x)))),
      h('tbody', {}, checkpoints.map((c) => h('tr', {}, h('td', {}, h('code', {}, c.name)), h('td', {}, c.branch), h('td', {}, h('code', {}, short(c.commit))),
        h('td', {}, c.by), h('td', {}, ago(c.created)), h('td', {}, c.message ?? '')))))),
    section('History of main', h('ol', { class: 'log' }, log.map((e) => h('li', {},
      h('code', {}, short(e.commit)), ' ', h('span', {}, e.subject), ' ', h('span', { class: 'muted' }, ago(e.time)),
      e.trailers['Nas-Principal'] ? h('span', { class: 'muted' }, ` · ${e.trailers['Nas-Principal']}`) : null)))),
    h('section', { class: 'recycle' }, h('h2', {}, `Recycle area (${waiting(trash).length})`), recycleArea(role, trash, branches.map((b) => b.name).filter((b) => b !== 'main'))),
  );
}

/** One entry per deletion (a folder stands for what went with it), restored ones left out. */
const waiting = (trash) => trash.filter((t) => !t.within && !t.restored);

/**
 * The recycle area, one entry per deletion, TRASH_PER_PAGE rows a page, newest first as listed, narrowed by branch and
 * by a search in the paths (a folder's contents included); one "restore into" choice for the page (not a select on every
 * row): by default each entry goes back into the branch it was deleted from, if that branch is still there.
 */
function recycleArea(role, trash, usable) {
  const entries = waiting(trash);
  if (entries.length === 0) return h('p', { class: 'muted' }, trash.length ? `nothing waits (${trash.length} restored)` : 'empty');
  const inside = new Map();
  for (const t of trash) if (t.within) inside.set(t.within, [...(inside.get(t.within) ?? []), t]);
  const into = h('select', { class: 'restore-into', 'aria-label': 'branch to restore into' },
    h('option', { value: '' }, 'the branch it was deleted from'), usable.map((b) => h('option', { value: b }, b)));
  const from = h('select', { class: 'filter-branch', 'aria-label': 'deleted from' },
    h('option', { value: '' }, 'every branch'), [...new Set(entries.map((t) => t.branch))].map((b) => h('option', { value: b }, b)));
  const search = h('input', { type: 'search', class: 'filter-path', placeholder: 'search paths', 'aria-label': 'search paths' });
  const body = h('tbody');
  const pager = h('div', { class: 'pager' });
  const target = (t) => into.value || (usable.includes(t.branch) ? t.branch : null);
  // As the person left them before this draw (an option gone since falls back to the first).
  for (const [select, value] of [[into, recycleKept.into], [from, recycleKept.from]]) if ([...select.options].some((o) => o.value === value)) select.value = value;
  search.value = recycleKept.search;
  let page = recycleKept.page;
  const draw = () => {
    Object.assign(recycleKept, { into: into.value, from: from.value, search: search.value });
    const text = search.value.trim().toLowerCase();
    const hit = (t) => t.path.toLowerCase().includes(text);
    const shown = entries.filter((t) => (!from.value || t.branch === from.value) && (!text || hit(t) || (inside.get(t.id) ?? []).some(hit)));
    page = recycleKept.page = Math.max(0, Math.min(page, Math.ceil(shown.length / TRASH_PER_PAGE) - 1));
    body.replaceChildren(...shown.slice(page * TRASH_PER_PAGE, (page + 1) * TRASH_PER_PAGE).map((t) => trashRow(role, t, inside.get(t.id) ?? [], () => target(t))));
    pagerBar(pager, 'entries', page, TRASH_PER_PAGE, shown.length, (p) => { page = p; draw(); });
  };
  for (const control of [into, from]) control.addEventListener('change', draw);
  search.addEventListener('input', () => { page = 0; draw(); });
  draw();
  return h('div', {},
    h('div', { class: 'recycle-bar' }, usable.length ? h('label', {}, 'Restore into ', into) : h('span', { class: 'muted' }, 'create a branch to restore into'),
      h('label', {}, ' Deleted from ', from), ' ', search, pager),
    h('table', { class: 'trash' }, h('thead', {}, h('tr', {}, ['deleted', 'path', 'from', 'size', ''].map((x) => h('th', {}, x)))), body));
}

/** A folder's row: its count, and what went with it on request (the first 200 paths). */
function folderPath(t, contents) {
  const files = contents.filter((c) => c.kind !== 'dir');
  return h('details', { class: 'went-with' },
    h('summary', {}, h('code', {}, `${t.path}/`), ` ${files.length} file${files.length === 1 ? '' : 's'}`),
    h('ul', {}, files.slice(0, 200).map((c) => h('li', {}, h('code', {}, c.path.slice(t.path.length + 1)), h('span', { class: 'muted' }, ` ${size(c.size)}`))),
      files.length > 200 ? h('li', { class: 'muted' }, `and ${files.length - 200} more`) : null));
}

function trashRow(role, t, contents, target) {
  const branch = target();
  const button = h('button', {
    disabled: !branch,
    title: branch ? `restore ${t.path} into ${branch}` : `${t.branch} is gone: choose a branch to restore into`,
    onclick: async () => {
      button.disabled = true;
      try {
        const { result } = await api('POST', `/v1/homes/${enc(role)}/trash/restore`, { id: t.id, branch: target() });
        const more = result.contents?.length ? ` with the ${result.contents.length} path(s) deleted with it` : '';
        notice(`Restored ${result.restored.path} into ${result.view}/${result.to}${more}.`, 'ok');
        setTimeout(() => drawHome(role).catch((e) => notice(e.message)), 600);
      } catch (err) {
        notice(err.message);
        button.disabled = false;
      }
    },
  }, branch ? `Restore into ${branch}` : 'Restore');
  return h('tr', { 'data-trash': t.id, 'data-branch': t.branch }, h('td', { class: 'when' }, ago(t.deletedAt), t.pending ? h('span', { class: 'muted' }, ' (pending)') : ''),
    h('td', { class: 'path' }, t.contents ? folderPath(t, contents) : h('code', {}, t.path)), h('td', {}, t.branch),
    h('td', { class: 'num' }, size(t.contents ? t.contents.bytes : t.size)), h('td', { class: 'act' }, button));
}

/** Merged by policy, approved and rejected PRs per day (bars); the totals and approval rate are nas pr stats'. */
function prChart(prs, stats) {
  const days = new Map();
  for (const p of prs) {
    const day = p.created.slice(0, 10);
    const d = days.get(day) ?? { policy: 0, approved: 0, rejected: 0 };
    if (p.merged_by === 'policy') d.policy++;
    else if (p.merged_by) d.approved++;
    else if (p.rejected_by) d.rejected++;
    days.set(day, d);
  }
  const rows = [...days].sort(([a], [b]) => (a < b ? -1 : 1)).slice(-14);
  const rate = stats.approval_rate === null ? 'no decisions yet' : `${stats.approval_rate}% of your decisions approved`;
  const summary = h('p', { class: 'muted' }, `${stats.total} PRs · ${stats.merged_by_policy} merged by policy · ${rate}`);
  if (rows.length === 0) return summary;
  const ns = 'http://www.w3.org/2000/svg';
  const svg = (tag, attrs) => {
    const el = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
    return el;
  };
  const W = 560;
  const H = 140;
  const max = Math.max(1, ...rows.map(([, d]) => d.policy + d.approved + d.rejected));
  const bw = Math.min(36, (W - 20) / rows.length - 6);
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H + 24}`, class: 'chart', role: 'img', 'aria-label': 'PRs per day' });
  rows.forEach(([day, d], i) => {
    const x = 10 + i * (bw + 6);
    let y = H;
    for (const [k, cls] of [['policy', 'policy'], ['approved', 'approved'], ['rejected', 'rejected']]) {
      const hgt = (d[k] / max) * (H - 10);
      y -= hgt;
      const rect = svg('rect', { x, y, width: bw, height: hgt, class: cls });
      const title = svg('title', {});
      title.textContent = `${day}: ${d[k]} ${k === 'policy' ? 'merged by policy' : k}`;
      rect.append(title);
      chart.append(rect);
    }
    const label = svg('text', { x: x + bw / 2, y: H + 16, 'text-anchor': 'middle', class: 'axis' });
    label.textContent = day.slice(5);
    chart.append(label);
  });
  const legend = h('p', { class: 'legend' }, h('span', { class: 'key policy' }, 'merged by policy'), h('span', { class: 'key approved' }, 'approved'), h('span', { class: 'key rejected' }, 'rejected'));
  return h('div', {}, summary, chart, legend);
}
