import { readFileSync } from 'node:fs';

/** Agent NAS's version, from package.json (dist/src/util/ is three levels below it). */
export function version(): string {
  return (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}
