/** Decode UTF-8 text; null for content that is not text (a NUL byte or invalid UTF-8). */
export function decodeText(buf: Buffer): string | null {
  if (buf.includes(0)) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(buf);
  } catch {
    return null;
  }
}

/** The `Nas-*` trailers of a commit message (who and why: run, lease, principal, writers...), by name. */
export function nasTrailers(message: string): Record<string, string> {
  return Object.fromEntries([...message.matchAll(/^(Nas-[A-Za-z-]+): (.*)$/gm)].map((m) => [m[1], m[2]]));
}
