/** Paths inside a view: '/'-separated, relative to the view's root ('' is the root). */

export const join = (dir: string, name: string): string => (dir === '' ? name : `${dir}/${name}`);
export const parentOf = (rel: string): string => rel.slice(0, Math.max(0, rel.lastIndexOf('/')));
