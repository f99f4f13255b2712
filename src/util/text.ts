/** Decode UTF-8 text; null for content that is not text (a NUL byte or invalid UTF-8). */
export function decodeText(buf: Buffer): string | null {
  if (buf.includes(0)) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(buf);
  } catch {
    return null;
  }
}
