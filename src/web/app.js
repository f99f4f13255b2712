// The Human Gate page: the decision inbox, one PR, one Home. Plain browser JavaScript, no build step.
// Every piece of data reaches the page as text (textContent, never HTML strings); the one exception is the diff,
// which diff2html renders and escapes itself. Every state change sends the session's CSRF token.
'use strict';

const csrf = document.querySelector('meta[name="csrf"]').content;
const main = document.getElementById('main');
const POLL_MS = 3000;
/** A poll nasd has not answered in this long counts as no answer (a nasd that hangs is as offline as one that stopped). */
const POLL_WAIT_MS = 6000;

/** An element with attributes and children; strings become text nodes, so nothing in them is markup. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

/** The control API through the session: the same routes and rules as the nas CLI. */
/** `waitMs`: give up (a TimeoutError) when nasd has not answered by then. */
async function api(method, path, body, etag, waitMs) {
  const headers = { 'x-csrf-token': csrf };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (etag) headers['if-none-match'] = etag;
  const res = await fetch(`/api${path}`, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin', signal: waitMs ? AbortSignal.timeout(waitMs) : undefined,
  });
  if (res.status === 304) return { unchanged: true };
  if (res.status === 401) {
    location.reload();
    throw new Error('the session ended: log in again with nas web open');
  }
  const reply = await res.json();
  if (!reply.ok) throw new Error(reply.error);
  return { result: reply.result, etag: res.headers.get('etag') };
}

const enc = encodeURIComponent;
const get = async (path) => (await api('GET', path)).result;

function notice(text, kind = 'error') {
  const el = document.getElementById('notice');
  el.textContent = text;
  el.className = `notice ${kind}`;
  el.hidden = false;
  clearTimeout(notice.timer);
  notice.timer = setTimeout(() => (el.hidden = true), 8000);
}

function ago(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/** Put a page's parts in <main>, leaving out the parts that are not there (null). */
const show = (...parts) => main.replaceChildren(...parts.filter((x) => x !== null && x !== undefined && x !== false));

function until(iso) {
  const s = (Date.parse(iso) - Date.now()) / 1000;
  if (Number.isNaN(s)) return iso;
  if (s <= 0) return `expired ${ago(iso)}`;
  return s < 3600 ? `in ${Math.ceil(s / 60)} min` : s < 86400 ? `in ${Math.round(s / 3600)} h` : `in ${Math.round(s / 86400)} d`;
}

const size = (n) => (n === undefined ? '–' : n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`);
const badge = (state) => h('span', { class: `badge ${state}` }, state);
const short = (oid) => (oid ? oid.slice(0, 10) : '–');

/**
 * Whether the page is current, in words (not colour alone) in the header: "live" while the polls below answer,
 * "reconnecting…" after one fails, "offline since <time>" once a second fails in a row (nasd stopped, the network
 * gone), and "live" again at the next answer.
 */
const connection = {
  failures: 0,
  since: null,
  show(state, text, title) {
    const el = document.getElementById('live');
    el.hidden = false;
    el.className = `live ${state}`;
    el.dataset.state = state;
    el.textContent = text;
    el.title = title;
  },
  answered() {
    if (this.failures === 0 && this.since === null && document.getElementById('live').dataset.state === 'on') return;
    this.failures = 0;
    this.since = null;
    this.show('on', 'live', 'nasd answers: this page updates by itself');
  },
  failed() {
    this.failures++;
    this.since ??= new Date();
    const at = this.since.toTimeString().slice(0, 8); // HH:MM:SS, local time
    if (this.failures < 2) this.show('retry', 'reconnecting…', `nasd did not answer at ${at}; trying again`);
    else this.show('off', `offline since ${at}`, `nasd has not answered since ${this.since.toISOString()}: what this page shows may be out of date; it tries again every ${POLL_MS / 1000} s`);
  },
};

/**
 * Poll a GET route; `render` runs on the first answer and whenever the answer changes (ETag). Every answer, or
 * the lack of one, drives the header's live indicator; an error nasd answered with shows as a notice.
 */
function live(path, render) {
  let etag;
  let stopped = false;
  const tick = async () => {
    if (stopped) return;
    try {
      const r = await api('GET', path, undefined, etag, POLL_WAIT_MS);
      if (!r.unchanged) {
        etag = r.etag;
        render(r.result);
      }
      connection.answered();
    } catch (err) {
      // fetch throws a TypeError when nothing answered (and a TimeoutError when it took too long); anything else is
      // an answer (a refusal) worth reading.
      if (err instanceof TypeError || err.name === 'TimeoutError') connection.failed();
      else notice(err.message);
    }
    setTimeout(tick, POLL_MS);
  };
  tick();
  return () => (stopped = true);
}

// ---- navigation ------------------------------------------------------------------------------------

async function nav() {
  const homes = await get('/v1/homes');
  const el = document.getElementById('nav');
  el.replaceChildren(h('a', { href: '/' }, 'Decisions'), ...homes.map((home) => h('a', { href: `/home/${enc(home.role)}` }, home.role)));
}

// ---- the decision inbox ----------------------------------------------------------------------------

function inbox() {
  document.title = 'Decisions · Agent NAS';
  const list = h('div', { class: 'cards' });
  const summary = h('p', { class: 'muted' });
  // The filter lives in the address (?home=&reason=), so a reload or a shared link keeps it.
  const query = new URLSearchParams(location.search);
  const home = h('select', { class: 'filter-home', 'aria-label': 'show the PRs of one Home' });
  const reason = h('select', { class: 'filter-reason', 'aria-label': 'show the PRs that wait for one reason' });
  let items = [];
  const fill = (select, label, values, chosen) => select.replaceChildren(h('option', { value: '' }, label),
    ...[...new Set([...values, chosen].filter(Boolean))].sort().map((v) => h('option', { value: v, selected: v === chosen }, v)));
  const draw = () => {
    const chosen = { home: home.value || query.get('home') || '', reason: reason.value || query.get('reason') || '' };
    fill(home, 'every Home', items.map((d) => d.home), chosen.home);
    fill(reason, 'any reason', items.flatMap(reasonKinds), chosen.reason);
    const shown = items.filter((d) => (!chosen.home || d.home === chosen.home) && (!chosen.reason || reasonKinds(d).includes(chosen.reason)));
    const count = (s) => shown.filter((d) => d.state === s).length;
    summary.textContent = (items.length === 0 ? 'Nothing waits for you.'
      : `${count('waiting')} waiting · ${count('conflict')} in conflict · ${count('failed')} failed — oldest first`)
      + (shown.length < items.length ? ` (${shown.length} of ${items.length} shown)` : '');
    list.replaceChildren(...shown.map(decisionCard));
  };
  const choose = () => {
    for (const [k, el] of [['home', home], ['reason', reason]]) if (el.value) query.set(k, el.value); else query.delete(k);
    const q = query.toString();
    history.replaceState(null, '', q ? `/?${q}` : '/');
    draw();
  };
  home.addEventListener('change', choose);
  reason.addEventListener('change', choose);
  show(h('h1', {}, 'Decisions'), h('div', { class: 'filters' }, h('label', {}, 'Home ', home), h('label', {}, 'Reason ', reason)), summary, list);
  live('/v1/decisions', (result) => {
    items = result;
    draw();
  });
}

/** What a decision waits for, as a few kinds a person filters by (a reason's paths left out): its state when it is not waiting. */
function reasonKinds(d) {
  const kinds = [[/^deletes /, 'deletes files'], [/untrusted input/, 'read untrusted input'], [/session start/, 'changes what agents load at start'],
    [/Home metadata/, 'changes Home metadata'], [/marks notes reviewed/, 'marks notes reviewed'], [/mode-risk/, 'modes a person must see'],
    [/command failed/, 'the run failed'], [/policy\.yaml/, 'main\'s merge policy'], [/a person decides/, 'main changed the same files']];
  const out = d.reasons.map((r) => kinds.find(([re]) => re.test(r))?.[1] ?? r.split(':')[0]);
  if (d.state !== 'waiting') out.push(d.state === 'conflict' ? 'conflicts with main' : d.state === 'failed' ? 'a check failed' : d.state);
  return [...new Set(out)];
}

function decisionCard(d) {
  const href = `/pr/${enc(d.home)}/${d.id}`;
  return h('a', { class: `card ${d.state}`, href, 'data-pr': `${d.home}/${d.id}` },
    h('div', { class: 'card-head' }, badge(d.state), exitFlag(d.exit), importedFlag(d.imported), h('span', { class: 'where' }, `${d.home} · PR ${d.id}`), h('span', { class: 'age', title: d.created }, ago(d.created))),
    h('div', { class: 'intent' }, d.intent),
    h('div', { class: 'meta' },
      h('span', {}, 'branch ', h('code', {}, d.branch)), d.run ? h('span', {}, 'run ', h('code', {}, d.run)) : null,
      h('span', {}, `by ${d.principal}`), h('span', {}, `${d.files} file${d.files === 1 ? '' : 's'}`)),
    d.reasons.length ? h('ul', { class: 'reasons' }, d.reasons.map((r) => h('li', {}, r))) : null,
    h('div', { class: 'checks' }, d.checks.map((c) => h('span', { class: `check ${c.ok ? 'pass' : 'fail'}` }, `${c.ok ? '✓' : '✗'} ${c.name}`))));
}

/** A run's exit status: marked when its command failed (a signal, or not 0), plain when it succeeded. */
function exitFlag(exit) {
  if (exit === undefined || exit === '') return null;
  return exit === '0' ? h('span', { class: 'flag exit' }, 'run exit 0')
    : h('span', { class: 'flag exit failed', title: "the run's command did not succeed: its work may be unfinished" }, `run failed: exit ${exit}`);
}

/** A PR that came with an import: made in the Home exported, by a run or a lease of that Home, not of this one. */
function importedFlag(i) {
  return i ? h('span', { class: 'flag imported', title: `made in the Home ${i.from}; came with ${i.file}, imported ${i.at}` }, `imported from ${i.from}, ${ago(i.at)}`) : null;
}

// ---- one PR -----------------------------------------------------------------------------------------

function prPage(role, id) {
  document.title = `PR ${id} · ${role} · Agent NAS`;
  let shown;
  let updated;
  // The PR's detail (its whole diff) is fetched once, and again only when the Home's PR list says it changed.
  const load = async () => {
    const pr = await get(`/v1/homes/${enc(role)}/prs/${id}`);
    updated = pr.updated;
    if (!shown) {
      shown = renderPr(role, pr);
      return;
    }
    // The diff does not change; only the state does: re-render the decision, keep the diff (and its page) as it is.
    shown.decision.replaceWith((shown.decision = decisionBox(role, pr)));
    shown.state.replaceWith((shown.state = badge(pr.state)));
    shown.why.replaceWith((shown.why = whyBox(pr)));
  };
  load().then(() => live(`/v1/homes/${enc(role)}/prs`, (list) => {
    revertedBy(shown.reverted, role, id, list);
    const mine = list.find((p) => p.id === id);
    if (mine && mine.updated !== updated) load().catch((err) => notice(err.message));
  }), (err) => main.replaceChildren(h('p', { class: 'notice error' }, err.message)));
}

function renderPr(role, pr) {
  const reverted = h('p', { class: 'reverted', hidden: true });
  const state = badge(pr.state);
  const decision = decisionBox(role, pr);
  const why = whyBox(pr);
  const inboxReads = new Set();
  const reads = pr.reads.split('\n').filter(Boolean).map((line) => line.slice(line.indexOf(' ') + 1));
  for (const r of reads) if (r.startsWith('inbox/')) inboxReads.add(r);
  const p = pr.provenance;
  show(
    h('p', { class: 'crumbs' }, h('a', { href: '/' }, 'Decisions'), ' / ', h('a', { href: `/home/${enc(role)}` }, role), ` / PR ${pr.id}`),
    h('div', { class: 'pr-head' }, state, exitFlag(p.exit), importedFlag(pr.imported), h('h1', { class: 'intent' }, pr.intent)),
    h('div', { class: 'meta' },
      h('span', {}, 'branch ', h('code', {}, pr.branch)), h('span', {}, `by ${p.principal}`),
      p.run ? h('span', {}, 'run ', h('code', {}, p.run)) : null, p.lease ? h('span', {}, 'lease ', h('code', {}, p.lease)) : null,
      h('span', { title: pr.created }, `proposed ${ago(pr.created)}`),
      h('span', {}, `${pr.changes.added} added, ${pr.changes.modified} modified, ${pr.changes.deleted} deleted`),
      pr.reverts ? h('span', { class: 'reverts' }, 'reverts ', h('a', { href: `/pr/${enc(role)}/${pr.reverts}` }, `PR ${pr.reverts}`)) : null),
    reverted,
    decision,
    why,
    unresolvedBox(role, pr.branch),
    pr.conflicts?.length ? section('Conflicts', h('ul', {}, pr.conflicts.map((c) =>
      h('li', {}, h('code', {}, c.path), ` — ${c.kind}${c.keys ? `: ${c.keys.join(', ')}` : ''}${c.hunks ? ` (${c.hunks.length} place${c.hunks.length === 1 ? '' : 's'})` : ''}`)))) : null,
    section('Checks', pr.checks.length === 0 ? h('p', { class: 'muted' }, 'no checks ran') : h('div', {}, pr.checks.map((c) =>
      h('details', { class: `check-row ${c.ok ? 'pass' : 'fail'}`, open: !c.ok },
        h('summary', {}, h('span', { class: `check ${c.ok ? 'pass' : 'fail'}` }, `${c.ok ? '✓' : '✗'} ${c.name}`), h('span', { class: 'muted' }, ` ${c.ms} ms`)),
        c.output ? h('pre', {}, c.output) : h('p', { class: 'muted' }, 'no output'))))),
    section('Trust labels', trustList(pr.trust)),
    section(`What the run read (${reads.length})`, reads.length === 0 ? h('p', { class: 'muted' }, 'nothing recorded') :
      h('ul', { class: 'reads' }, reads.map((r) => h('li', { class: inboxReads.has(r) ? 'inbox' : '' }, h('code', {}, r), inboxReads.has(r) ? h('span', { class: 'flag' }, 'untrusted input') : null)))),
    section('Provenance', provenance(pr)),
    section(`Files (${pr.files.length})${pr.folders?.length ? ` and folders (${pr.folders.length})` : ''}`, filesTable(pr.files, pr.folders ?? [], (side, path) => `/api/v1/homes/${enc(role)}/prs/${pr.id}/file/${side}/${enc(path)}`)),
    section('Changes', diffView(pr.diff, pr.files)),
  );
  return { decision, state, why, reverted };
}

/** The PRs that undo this one (nas pr revert, the Revert button), each with its state. */
function revertedBy(el, role, id, list) {
  const by = list.filter((p) => p.reverts === id);
  el.hidden = by.length === 0;
  // A revert that merged or may still merge: no second Revert is offered (app.css hides it).
  el.classList.toggle('settled', by.some((p) => !['rejected', 'expired', 'superseded'].includes(p.state)));
  el.replaceChildren(...(by.length ? ['Reverted by ', by.map((p, i) => [i ? ', ' : '', h('a', { href: `/pr/${enc(role)}/${p.id}` }, `PR ${p.id}`), ` (${p.state})`])] : []).flat(2));
}

/**
 * Files `nas branch update` left in the PR's branch for a person (not text, deleted on one side, a mode each side
 * changed): pick the side that stays; the other goes to the recycle area, and the branch can be proposed again.
 */
function unresolvedBox(role, branch) {
  const box = h('div', { class: 'unresolved' });
  const fill = async () => {
    const open = (await get(`/v1/homes/${enc(role)}/branches`)).find((b) => b.name === branch)?.unresolved ?? [];
    const pick = (path, take, label) => {
      const button = h('button', {
        class: `take-${take}`,
        onclick: async () => {
          button.disabled = true;
          try {
            await api('POST', `/v1/homes/${enc(role)}/branches/${enc(branch)}/resolve`, { path, take });
            notice(`${path}: ${take === 'main' ? "main's" : "the branch's"} version stays; the other is in the recycle area.`, 'ok');
            await fill();
          } catch (err) {
            notice(err.message);
            button.disabled = false;
          }
        },
      }, label);
      return button;
    };
    box.replaceChildren(...(open.length === 0 ? [] : [section(`Unresolved in ${branch} (${open.length})`, h('ul', {}, open.map((u) =>
      h('li', { 'data-path': u.path }, h('code', {}, u.path), ` — ${u.why} `, pick(u.path, 'branch', "Keep the branch's"), ' ', pick(u.path, 'main', "Take main's")))))]));
  };
  fill().catch((err) => notice(err.message));
  return box;
}

/** Why the PR waits for a person, while it waits; once decided (or stopped), why it waited. */
function whyBox(pr) {
  const box = h('div', { class: 'why' });
  if (pr.reasons.length) box.append(section(pr.state === 'waiting' ? 'Why it waits' : 'Why it waited', h('ul', { class: 'reasons' }, pr.reasons.map((r) => h('li', {}, r)))));
  return box;
}

function provenance(pr) {
  const p = pr.provenance;
  const rows = [['principal', p.principal], ['lease', p.lease ?? '–'], ['run', p.run ?? '–'], ['run exit', p.exit || '–'],
    ['run egress', p.egress === undefined ? '–' : p.egress ? "yes (lease scope egress: the host's network)" : 'no (loopback only)'],
    ['written by', p.writers ? p.writers.join(', ') : '–'], ['reads digest', p.reads_digest],
    ['head', pr.head], ['fork point', pr.base], ['main when proposed', pr.target_head]];
  return h('dl', { class: 'prov' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, h('code', {}, v))]));
}

const section = (title, body) => h('section', {}, h('h2', {}, title), body);

function trustList(t) {
  const row = (label, paths, cls) => h('li', { class: paths.length ? cls : '' }, `${label}: `, paths.length ? paths.map((x, i) => [i ? ', ' : '', h('code', {}, x)]) : h('span', { class: 'muted' }, 'none'));
  return h('ul', { class: 'trust' },
    row('notes changed', t.notes_changed, ''), row('unreviewed', t.unreviewed, ''),
    row('marked reviewed by the branch', t.reviewed_claims, 'warn'), row('session-start context changed', t.start_set ?? [], 'warn'),
    row('modes a person must see (setuid, setgid, world-writable)', t.mode_risk ?? [], 'warn'));
}

/** A change of metadata as a person reads it: `owner root → alice` (a side without a metadata record: unrecorded). */
const metaText = (m) => `${m.field} ${m.before ?? 'unrecorded'} → ${m.after ?? 'unrecorded'}`;

/** What of a file's or folder's metadata changed; a new file's mode when it says more than git's usual ones (setuid, odd permissions). */
function metaFlags(f) {
  const usual = ['100644', '100755', '120000'];
  if (f.meta) return f.meta.map((m) => h('span', { class: 'flag' }, metaText(m)));
  return !f.beforeMode && f.afterMode && !usual.includes(f.afterMode) ? h('span', { class: 'flag' }, `mode ${f.afterMode}`) : null;
}

/**
 * The files and folders a PR changes, by path: the first 100, and the rest on request (a 1,000-file PR stays quick to open).
 * Each file links to its content as the branch proposes it and as main has it, where it has one (`href(side, path)`).
 */
function filesTable(files, folders, href) {
  const SHOWN = 100;
  const all = [...folders.map((f) => ({ ...f, path: `${f.path}/`, folder: true })), ...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const link = (f, side, title) => h('a', { href: href(side, f.path), target: '_blank', rel: 'noopener', 'data-side': side, title }, side);
  const links = (f) => (f.folder || f.withheld ? null : [
    f.status !== 'deleted' ? link(f, 'branch', 'the file as the branch proposes it') : null,
    f.status !== 'added' ? link(f, 'main', 'the file as main has it now') : null]);
  const row = (f) => h('tr', f.folder ? { 'data-folder': '' } : {},
    h('td', {}, badge(f.status)), h('td', {}, h('code', {}, f.path), f.binary ? h('span', { class: 'flag' }, 'binary') : null,
      metaFlags(f),
      f.withheld ? h('span', { class: 'flag' }, 'content withheld') : null),
    h('td', { class: 'num' }, f.folder ? '–' : f.status === 'added' ? size(f.after) : f.status === 'deleted' ? size(f.before) : `${size(f.before)} → ${size(f.after)}`),
    h('td', { class: 'open' }, links(f)));
  const body = h('tbody', {}, all.slice(0, SHOWN).map(row));
  const more = all.length > SHOWN
    ? h('button', { class: 'more', onclick: () => { body.append(...all.slice(SHOWN).map(row)); more.remove(); } }, `show all ${all.length} rows`)
    : null;
  return h('div', {}, h('table', { class: 'files' },
    h('thead', {}, h('tr', {}, h('th', {}, 'status'), h('th', {}, 'path'), h('th', {}, 'size'), h('th', {}, 'open'))), body), more);
}

function decisionBox(role, pr) {
  const box = h('div', { class: 'decision' });
  if (pr.state !== 'waiting') {
    const d = pr.decision;
    const text = pr.state === 'merged'
      ? (pr.merged.by === 'policy' ? `Merged by policy ${ago(pr.merged.at)}` : `Approved by ${pr.merged.by} ${ago(pr.merged.at)}; merged as ${short(pr.merged.commit)}`)
      : pr.state === 'rejected' ? `Rejected by ${d?.by ?? '?'} ${d ? ago(d.at) : ''}: ${d?.why ?? ''}`
        : pr.state === 'conflict' ? 'Conflicts with main: fix the branch and propose again.'
          : pr.state === 'failed' ? 'A check failed: fix the branch and propose again.'
            : pr.state === 'superseded' ? `Superseded by PR ${pr.superseded_by}, a later PR of its branch: decide that one.`
              : `This PR is ${pr.state}.`;
    box.append(h('p', { class: `decided ${pr.state}` }, text));
    if (pr.state === 'conflict' || pr.state === 'failed') box.append(rejectForm(role, pr));
    if (pr.state === 'merged') box.append(revertButton(role, pr));
    return box;
  }
  const approve = h('button', { class: 'approve', onclick: () => { approve.hidden = true; approve.after(confirmBox); } }, 'Approve and merge');
  // Nothing is sent until the owner confirms, having read what the merge brings into main.
  const n = (status) => pr.files.filter((f) => f.status === status).length;
  const merge = h('button', { class: 'confirm-merge', onclick: () => decide(merge, () => api('POST', `/v1/homes/${enc(role)}/prs/${pr.id}/approve`, {}), 'approved') }, 'Merge into main');
  const cancel = h('button', { class: 'cancel', onclick: () => { confirmBox.remove(); approve.hidden = false; } }, 'Cancel');
  const confirmBox = h('div', { class: 'confirm', role: 'alertdialog', 'aria-label': 'confirm the merge' },
    h('span', {}, 'Merge branch ', h('code', {}, pr.branch), ` into main: ${pr.files.length} file${pr.files.length === 1 ? '' : 's'}`,
      ` (${n('added')} added, ${n('modified')} modified, ${n('deleted')} deleted)?`), merge, cancel);
  box.append(h('p', {}, 'This PR waits for your decision.'), approve, rejectForm(role, pr));
  return box;
}

/**
 * Undo a merged PR: asks first, then proposes its inverse on today's main as a new PR (nas pr revert), which goes
 * through the same checks, policy and decision as any other; the page moves to that PR. Main is not touched here.
 */
function revertButton(role, pr) {
  const wrap = h('div', { class: 'revert-box' });
  const ask = h('button', { class: 'revert', onclick: () => { ask.hidden = true; wrap.append(confirmBox); } }, 'Revert');
  const go = h('button', {
    class: 'confirm-revert',
    onclick: async () => {
      go.disabled = true;
      try {
        const { result } = await api('POST', `/v1/homes/${enc(role)}/prs/${pr.id}/revert`, {});
        notice(`PR ${result.id} proposed: it reverts PR ${pr.id} (${result.state}).`, 'ok');
        setTimeout(() => location.assign(`/pr/${enc(role)}/${result.id}`), 600);
      } catch (err) {
        notice(err.message);
        go.disabled = false;
      }
    },
  }, 'Propose the revert');
  const cancel = h('button', { class: 'cancel', onclick: () => { confirmBox.remove(); ask.hidden = false; } }, 'Cancel');
  const confirmBox = h('div', { class: 'confirm', role: 'alertdialog', 'aria-label': 'confirm the revert' },
    h('span', {}, `Propose a new PR that undoes PR ${pr.id}'s ${pr.files.length} file${pr.files.length === 1 ? '' : 's'} on today's main (branch `,
      h('code', {}, `revert-${pr.id}`), ')? It passes the same checks and policy, and may wait for you.'), go, cancel);
  wrap.append(ask);
  return wrap;
}

function rejectForm(role, pr) {
  const why = h('textarea', { rows: 2, placeholder: 'Why? (the run reads it)', 'aria-label': 'reason for rejecting' });
  const reject = h('button', {
    class: 'reject',
    onclick: () => {
      if (!why.value.trim()) return notice('Say why before rejecting: the run reads it.');
      decide(reject, () => api('POST', `/v1/homes/${enc(role)}/prs/${pr.id}/reject`, { why: why.value }), 'rejected');
    },
  }, 'Reject');
  return h('div', { class: 'reject-form' }, why, reject);
}

/** Run a decision once: the button waits, the answer (or the refusal, e.g. someone decided first) shows. */
async function decide(button, call, done) {
  button.disabled = true;
  try {
    const { result } = await call();
    notice(`PR ${result.id} ${result.state === 'merged' ? 'merged' : done}.`, 'ok');
    setTimeout(() => location.reload(), 600);
  } catch (err) {
    notice(err.message);
    button.disabled = false;
  }
}

/** Fill `pager` with previous/next buttons and `<what> 26–50 of 60` (nothing when everything fits one page); `go(page)` draws another page. */
function pagerBar(pager, what, page, per, total, go) {
  const pages = Math.ceil(total / per);
  pager.replaceChildren(...(pages <= 1 ? [] : [
    h('button', { disabled: page === 0, onclick: () => go(page - 1) }, '← previous'),
    h('span', {}, ` ${what} ${page * per + 1}–${Math.min(total, (page + 1) * per)} of ${total} `),
    h('button', { disabled: page >= pages - 1, onclick: () => go(page + 1) }, 'next →')]));
}

/** The patch, one page of files at a time (a 1,000-file diff stays responsive), side by side or unified; each file's metadata changes over its diff. */
function diffView(patch, files) {
  const metas = new Map(files.filter((f) => f.meta).map((f) => [f.path, f.meta]));
  const blocks = patch.split(/(?=^diff --git )/m).filter((b) => b.startsWith('diff --git '));
  if (blocks.length === 0) return h('p', { class: 'muted' }, 'no textual changes');
  const PER_PAGE = 25;
  let page = 0;
  let format = localStorage.getItem('diff-format') ?? 'side-by-side';
  const out = h('div', { class: 'diff' });
  const pager = h('div', { class: 'pager' });
  const toggle = h('div', { class: 'toggle' },
    ['side-by-side', 'line-by-line'].map((f) => h('button', { 'data-format': f, class: f === format ? 'on' : '', onclick: () => { format = f; localStorage.setItem('diff-format', f); draw(); } },
      f === 'side-by-side' ? 'Side by side' : 'Unified')));
  function draw() {
    for (const b of toggle.querySelectorAll('button')) b.className = b.dataset.format === format ? 'on' : '';
    const chunk = blocks.slice(page * PER_PAGE, (page + 1) * PER_PAGE).join('');
    // diff2html escapes every line and file name it renders; this is the page's only HTML from data.
    out.innerHTML = window.Diff2Html.html(chunk, { outputFormat: format, drawFileList: false, matching: 'lines' });
    for (const file of out.querySelectorAll('.d2h-file-wrapper')) {
      const meta = metas.get(file.querySelector('.d2h-file-name')?.textContent.trim());
      if (meta) file.querySelector('.d2h-file-header')?.after(h('div', { class: 'meta-change' }, meta.map((m, i) => [i ? ' · ' : '', metaText(m)])));
    }
    pagerBar(pager, 'files', page, PER_PAGE, blocks.length, (p) => { page = p; draw(); });
  }
  draw();
  return h('div', {}, toggle, pager, out);
}

// ---- routing ----------------------------------------------------------------------------------------

async function start() {
  document.getElementById('logout').addEventListener('click', async () => {
    await fetch('/logout', { method: 'POST', headers: { 'x-csrf-token': csrf }, credentials: 'same-origin' });
    location.assign('/');
  });
  try {
    await nav();
    const parts = location.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    if (parts[0] === 'pr' && parts.length === 3) prPage(parts[1], Number(parts[2]));
    else if (parts[0] === 'home' && parts.length === 2) await homePage(parts[1]);
    else inbox();
  } catch (err) {
    main.replaceChildren(h('p', { class: 'notice error' }, err.message));
  }
}

start();
