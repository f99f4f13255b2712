import yaml from 'js-yaml';
import { MODE, type Entry, type Identity, type Store } from '../store/store.js';
import { mapLimit } from '../util/concurrency.js';
import { PRS_REF, prHeadRef } from '../store/refs.js';

/**
 * Agent PRs of a Home, plain text in its Store under refs/nas/prs: `<id>/pr.yaml` and `<id>/reads.txt`
 * (the read manifest). `refs/nas/pr-heads/<id>` keeps each proposed commit alive whatever the branch does.
 */

/**
 * `merging` while a merge is under way (by policy or an approval): no other decision can take the PR then.
 * `superseded`: a later PR of the same branch was filed while it was undecided (SUPERSEDABLE); `expired`: its
 * branch expired or went before a decision. Neither waits for anyone.
 */
export type PrState = 'merged' | 'waiting' | 'conflict' | 'failed' | 'rejected' | 'merging' | 'expired' | 'superseded';

/** The states a later PR of the same branch replaces: nothing was decided on them, and the later one is what counts. */
export const SUPERSEDABLE: readonly PrState[] = ['waiting', 'conflict', 'failed'];

export class PrStateConflict extends Error {}

export interface Conflict {
  path: string;
  /**
   * text: both sides changed lines; binary: both sides changed a file that is not text; delete: one side deleted
   * what the other changed; structured: both changed the same keys of a JSON or YAML file differently.
   */
  kind: 'text' | 'binary' | 'delete' | 'structured';
  /** For structured: the keys (dotted paths) both sides changed differently, or why the file could not be merged. */
  keys?: string[];
  /** Where both sides changed the same lines: the base's lines, main's, and the branch's. */
  hunks?: { line: number; base: string[]; main: string[]; branch: string[] }[];
}

export interface PullRequest {
  id: number;
  home: string;
  branch: string;
  target: 'main';
  state: PrState;
  intent: string;
  created: string;
  updated: string;
  /** The proposed commit, where it forked from main, and main when it was proposed. */
  head: string;
  base: string;
  target_head: string;
  /** `writers`: the accounts whose calls made the branch's commits (their Nas-Writers trailers), when the kernel said. */
  /** `proposal`, `host`: in a cluster, the queued proposal it was filed from and the host that proposed it. */
  /** `egress`: a run's PR only: whether the run had the host's network (its lease's egress scope) or loopback only. */
  provenance: {
    principal: string; lease?: string; run?: string; exit?: string; egress?: boolean; writers?: string[]; reads: number; reads_digest: string; proposal?: string; host?: string;
  };
  changes: { added: number; modified: number; deleted: number; paths: string[] };
  checks: { name: string; ok: boolean; ms: number; output: string }[];
  trust: { notes_changed: string[]; unreviewed: string[]; reviewed_claims: string[]; start_set?: string[]; mode_risk?: string[] };
  /** Why it waits for a person, or why it failed. */
  reasons: string[];
  conflicts?: Conflict[];
  merged?: { commit: string; at: string; by: string };
  decision?: { by: string; at: string; action: 'approve' | 'reject'; why?: string };
  /**
   * It came with `nas import`: made in the Home `from` (its role there), which was exported to `file` and imported
   * here `at`. Set once: a PR imported again keeps where it was made.
   */
  imported?: { from: string; file: string; at: string };
  /** The later PR of the same branch that replaced it (state `superseded`). */
  superseded_by?: number;
  /** The earlier, undecided PRs of the same branch it replaced when it was filed. */
  supersedes?: number[];
  /** The merged PR whose changes it undoes (nas pr revert): proposed from main like any other change. */
  reverts?: number;
}

export class PrStore {
  constructor(private readonly store: Store, private readonly identity: Identity) {}

  async list(): Promise<PullRequest[]> {
    const tree = await this.tree();
    if (!tree) return [];
    const dirs = [...(await this.store.readTree(tree)).entries()].filter(([, e]) => e.mode === MODE.tree);
    const prs = await mapLimit(dirs, 16, async ([, e]) => this.parse((await this.store.readTree(e.oid)).get('pr.yaml')!));
    return prs.sort((a, b) => a.id - b.id);
  }

  /** The PRs of one branch, oldest first: only those are copied (a Home keeps every PR it ever had). */
  async ofBranch(branch: string): Promise<PullRequest[]> {
    const tree = await this.tree();
    if (!tree) return [];
    const dirs = [...(await this.store.readTree(tree)).values()].filter((e) => e.mode === MODE.tree);
    const prs = await mapLimit(dirs, 16, async (e) => this.parsed((await this.store.readTree(e.oid)).get('pr.yaml')!));
    return prs.filter((p) => p.branch === branch).sort((a, b) => a.id - b.id).map((p) => structuredClone(p));
  }

  async get(id: number): Promise<PullRequest | undefined> {
    const tree = await this.tree();
    const entry = tree ? await this.store.lookupPath(tree, `${id}/pr.yaml`) : null;
    return entry ? this.parse(entry) : undefined;
  }

  async reads(id: number): Promise<string> {
    const tree = await this.tree();
    const entry = tree ? await this.store.lookupPath(tree, `${id}/reads.txt`) : null;
    return entry ? (await this.store.readBlob(entry.oid)).toString() : '';
  }

  /**
   * Store a new PR under the next free id (allocated by compare-and-swap on the ref) and return it. The earlier
   * PRs of its branch still undecided (SUPERSEDABLE) become `superseded` in the same commit, so a decision on one
   * of them either lands before (and stands) or is refused after.
   */
  async create(pr: Omit<PullRequest, 'id'>, reads: string): Promise<PullRequest> {
    const readsBlob = await this.store.writeBlob(reads);
    let created!: PullRequest;
    await this.store.commitToRef(PRS_REF, async (tree) => {
      const entries = tree ? [...(await this.store.readTree(tree)).entries()].filter(([, e]) => e.mode === MODE.tree) : [];
      const id = Math.max(0, ...entries.map(([name]) => Number(name)).filter(Number.isInteger)) + 1;
      const replaced = await this.undecidedOf(pr.branch, entries);
      created = { id, ...pr, ...(replaced.length ? { supersedes: replaced.map((p) => p.id) } : {}) };
      const now = new Date().toISOString();
      const edits = await mapLimit(replaced, 16, async (p): Promise<[string, Entry]> => {
        const superseded: PullRequest = { ...p, state: 'superseded', superseded_by: id, updated: now, reasons: [...p.reasons, `superseded by PR ${id}, a later PR of its branch`] };
        return [`${p.id}/pr.yaml`, { oid: await this.store.writeBlob(yaml.dump(superseded)), mode: MODE.file }];
      });
      return new Map<string, Entry>([
        ...edits,
        [`${created.id}/pr.yaml`, { oid: await this.store.writeBlob(yaml.dump(created)), mode: MODE.file }],
        [`${created.id}/reads.txt`, { oid: readsBlob, mode: MODE.file }],
      ]);
    }, `pr: propose ${pr.branch} into ${pr.target}`, this.identity);
    await this.store.updateRef(prHeadRef(created.id), pr.head, null, `pr ${created.id}`);
    return created;
  }

  /**
   * Change a PR only if it is still in one of the `from` states, atomically with respect to every other
   * decision (the check and the write are one compare-and-swap on the PR ref).
   */
  async transition(id: number, from: PrState[], change: (pr: PullRequest) => void): Promise<PullRequest> {
    let result!: PullRequest;
    await this.store.commitToRef(PRS_REF, async (tree) => {
      const entry = tree ? await this.store.lookupPath(tree, `${id}/pr.yaml`) : null;
      if (!entry) throw new PrStateConflict(`no PR ${id}`);
      const pr = await this.parse(entry);
      if (!from.includes(pr.state)) throw new PrStateConflict(`PR ${id} is ${pr.state}`);
      change(pr);
      pr.updated = new Date().toISOString();
      result = pr;
      return new Map([[`${id}/pr.yaml`, { oid: await this.store.writeBlob(yaml.dump(pr)), mode: MODE.file }]]);
    }, `pr ${id}`, this.identity);
    return result;
  }

  async update(pr: PullRequest): Promise<void> {
    pr.updated = new Date().toISOString();
    const oid = await this.store.writeBlob(yaml.dump(pr));
    await this.store.commitToRef(PRS_REF, async () => new Map([[`${pr.id}/pr.yaml`, { oid, mode: MODE.file }]]), `pr ${pr.id}: ${pr.state}`, this.identity);
  }

  /** Mark every PR of an imported Store as having come with the import (see `imported`); one commit. */
  async markImported(file: string, at: string): Promise<void> {
    const prs = (await this.list()).filter((p) => !p.imported);
    if (prs.length === 0) return;
    const records = await mapLimit(prs, 16, async (p): Promise<[string, Entry]> =>
      [`${p.id}/pr.yaml`, { oid: await this.store.writeBlob(yaml.dump({ ...p, imported: { from: p.home, file, at } })), mode: MODE.file }]);
    await this.store.commitToRef(PRS_REF, async () => new Map(records), `pr: imported from ${file}`, this.identity);
  }

  /** The PRs of a branch, among these PR directories, that a later one would supersede. */
  private async undecidedOf(branch: string, dirs: [string, Entry][]): Promise<PullRequest[]> {
    const prs = await mapLimit(dirs, 16, async ([, e]) => {
      const record = await this.store.lookupPath(e.oid, 'pr.yaml');
      return record ? this.parsed(record) : null;
    });
    return prs.filter((p): p is PullRequest => !!p && p.branch === branch && SUPERSEDABLE.includes(p.state)).map((p) => structuredClone(p));
  }

  private async tree(): Promise<string | null> {
    const head = await this.store.readRef(PRS_REF);
    return head ? (await this.store.readCommit(head)).tree : null;
  }

  /** A record by its blob: blobs never change, so each is read once (the inbox and the page poll every few seconds). */
  private async parse(entry: Entry): Promise<PullRequest> {
    // A copy: callers change what they get (transition, update).
    return structuredClone(await this.parsed(entry));
  }

  /** The one parsed record of a blob, shared: never to be changed, nor handed out. */
  private async parsed(entry: Entry): Promise<PullRequest> {
    let pr = PARSED.get(entry.oid);
    if (!pr) {
      pr = yaml.load((await this.store.readBlob(entry.oid)).toString()) as PullRequest;
      if (PARSED.size >= 20_000) PARSED.delete(PARSED.keys().next().value!);
      PARSED.set(entry.oid, pr);
    }
    return pr;
  }
}

const PARSED = new Map<string, PullRequest>();
