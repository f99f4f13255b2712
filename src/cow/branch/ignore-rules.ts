import { createRequire } from 'node:module';
import type { Ignore, Options } from 'ignore';
import { BUILT_IN_IGNORE } from '../../policy/policy.js';
import { join, parentOf } from './paths.js';

// The package is CommonJS whose typings declare an ES default export: load it as what it is.
const ignore = createRequire(import.meta.url)('ignore') as (options?: Options) => Ignore;

const GITIGNORE = '.gitignore';
const MAX_ANSWERS = 100_000;
/** Policy's built-in rules (editor temp files), compiled once: below every `.gitignore`, as git's core.excludesFile. */
const BUILT_IN = ignore().add(BUILT_IN_IGNORE);

/**
 * The `.gitignore` files of a branch, with git's semantics: each file's patterns apply below its directory,
 * deeper files and later lines win, `!` re-includes, and nothing below an ignored directory can be
 * re-included. Rules are read lazily through the view (upper directory or git) and forgotten when a
 * `.gitignore` changes; answers are cached until then. Policy's built-in list (BUILT_IN_IGNORE) applies first,
 * at the root, so a Home's own rules (a `!` re-include too) override it, and Homes made before it get it.
 */
export class IgnoreRules {
  private readonly rules = new Map<string, Promise<Ignore | null>>();
  private readonly answers = new Map<string, Promise<boolean>>();
  /**
   * `read` gives a file's text as the view shows it, or null when there is none; `onChange` is called when
   * rules may have changed: what was left out as ignored deserves another look.
   */
  constructor(private readonly read: (rel: string) => Promise<string | null>, private readonly onChange: () => void = () => undefined) {}

  /** Call when rel changed: if it is (or may hold) a `.gitignore`, the rules it made are forgotten. */
  changed(rel: string, directory = false): void {
    const name = rel.slice(rel.lastIndexOf('/') + 1);
    if (!directory && name !== GITIGNORE) return;
    if (directory) this.rules.clear();
    else this.rules.delete(parentOf(rel));
    this.answers.clear();
    this.onChange();
  }

  /** Whether git would ignore rel (a directory when `directory`). */
  ignored(rel: string, directory = false): Promise<boolean> {
    const key = directory ? `${rel}/` : rel;
    let answer = this.answers.get(key);
    if (!answer) {
      // Answers are cheap to recompute from cached rules: keep at most this many, not one per path ever seen.
      if (this.answers.size >= MAX_ANSWERS) this.answers.clear();
      answer = this.decide(rel.split('/'), directory);
      this.answers.set(key, answer);
      answer.catch(() => this.answers.delete(key));
    }
    return answer;
  }

  private async decide(parts: string[], directory: boolean): Promise<boolean> {
    // Git does not descend into an ignored directory, so nothing below it can be re-included.
    if (parts.length > 1 && (await this.ignored(parts.slice(0, -1).join('/'), true))) return true;
    let ignored = BUILT_IN.test(parts.join('/') + (directory ? '/' : '')).ignored;
    for (let depth = 0; depth < parts.length; depth++) {
      const rules = await this.rulesOf(parts.slice(0, depth).join('/'));
      if (!rules) continue;
      const verdict = rules.test(parts.slice(depth).join('/') + (directory ? '/' : ''));
      if (verdict.ignored) ignored = true;
      else if (verdict.unignored) ignored = false;
    }
    return ignored;
  }

  private rulesOf(dir: string): Promise<Ignore | null> {
    let rules = this.rules.get(dir);
    if (!rules) {
      rules = this.read(join(dir, GITIGNORE)).then((text) => (text === null ? null : ignore().add(text)));
      this.rules.set(dir, rules);
      rules.catch(() => this.rules.delete(dir));
    }
    return rules;
  }
}
