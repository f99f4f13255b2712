/** Paths inside a view: '/'-separated, relative to the view's root ('' is the root). */

export const join = (dir: string, name: string): string => (dir === '' ? name : `${dir}/${name}`);
export const parentOf = (rel: string): string => rel.slice(0, Math.max(0, rel.lastIndexOf('/')));

/**
 * libfuse 2 keeps an unlinked file that is still open by renaming it to `.fuse_hidden<n>` and unlinks that
 * name at the last close. Such names are the deleted file's last moments: never committed, never filed.
 */
export const isFuseHidden = (rel: string): boolean => rel.slice(rel.lastIndexOf('/') + 1).startsWith('.fuse_hidden');
