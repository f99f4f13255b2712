/**
 * libgit2 reads the process umask by setting it to 0 for a moment (`git_futils_mktmp`, on libuv's threads, for
 * every object, tree and ref lock it writes): while one call holds it at 0, another thread's file or folder is made
 * with nothing masked (objects readable by everyone, folders writable by all), and two such reads interleaved can
 * leave the process at 0. Every libgit2 call that makes a file goes through here: one at a time in this process.
 */
let last: Promise<unknown> = Promise.resolve();

export function oneWriter<T>(write: () => T): Promise<Awaited<T>> {
  const run = last.then(write, write) as Promise<Awaited<T>>;
  last = run.catch(() => undefined);
  return run;
}
