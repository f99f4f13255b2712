import fs from 'node:fs/promises';

/** Whether anything (a file, a directory, a dangling link) has this name. */
export const exists = (path: string): Promise<boolean> => fs.lstat(path).then(() => true, () => false);
