/** A path as printed for a person or an agent: quoted when it holds control characters, so a name cannot forge lines. */
export const displayPath = (p: string): string => (/[\x00-\x1f\x7f]/.test(p) ? JSON.stringify(p) : p);
