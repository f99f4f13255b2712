import { createHash, randomBytes } from 'node:crypto';
import type { PrState } from '../merge/pr-store.js';
import type { Shipped } from './objects.js';

/**
 * A proposal as it waits in etcd for its Home's merge writer (`homes/<role>/queue/<id>`): everything the writer
 * needs to judge and merge it as the proposing host would have, the branch's head being on the git server
 * already (`refs/nas/hosts/<host>/heads/<branch>`). Who proposed was checked on the proposing host.
 */
export interface Proposal {
  id: string;
  host: string;
  role: string;
  branch: string;
  head: string;
  intent: string;
  checks: string[];
  principal: string;
  lease?: string;
  run?: string;
  exit?: string;
  /** Whether the run had the host's network (lease scope egress). */
  egress?: boolean;
  /** The read manifest's text (`<blob> <path>` lines): its paths and digest are the PR's. */
  reads: string;
  at: string;
  /** The branch's new objects, when small (objects.ts): the writer need not fetch the head. */
  objects?: Shipped;
}

/** What became of a proposal (`homes/<role>/results/<id>`): its PR, or why none was filed. */
export interface ProposalResult {
  id: string;
  pr?: number;
  state?: PrState;
  error?: string;
  status?: number;
  /** main on the git server once the result was published. */
  main: string;
  /** When the writer published it, and which host that was. */
  published_at?: string;
  writer?: string;
  /** On the asking host only: from queued to answered. */
  waited_ms?: number;
}

/**
 * Proposal ids sort by time, then host: `<ms, base36, 9 digits>-<host>-<random>`. etcd's create revision
 * orders the queue; the id only names a proposal and its result.
 */
export function proposalId(host: string): string {
  return `${Date.now().toString(36).padStart(9, '0')}-${host}-${randomBytes(4).toString('hex')}`;
}

/** Above this a read manifest travels cut to its first lines (etcd takes values up to 1.5 MiB). */
const READS_MAX = 256 * 1024;

export function shippedReads(text: string): string {
  return text.length <= READS_MAX ? text : text.slice(0, text.lastIndexOf('\n', READS_MAX) + 1);
}

/** The PR workflow's view of a shipped manifest: as the branch view's ReadManifest gives it. */
export function readsOf(text: string): { paths(): string[]; digest(): string; text(): string } {
  const paths = [...new Set(text.split('\n').filter(Boolean).map((l) => l.slice(l.indexOf(' ') + 1)))].sort();
  return { paths: () => paths, digest: () => `sha256:${createHash('sha256').update(text).digest('hex')}`, text: () => text };
}

/** Where a host's branch goes on the git server: only that host writes under its prefix. */
export const hostBranchRef = (host: string, branch: string): string => `refs/nas/hosts/${host}/heads/${branch}`;

/** A value from etcd as JSON, or undefined when it does not read. */
export function parsed<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}
