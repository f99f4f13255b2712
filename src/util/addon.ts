import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { UserError } from './errors.js';

/** native/ at the project's root: three levels up from dist/src/util, two from src/util (tests run the source). */
const here = path.dirname(fileURLToPath(import.meta.url));
const BUILT = path.resolve(here, here.split(path.sep).includes('dist') ? '../../..' : '../..', 'native/build/Release');
/** The binding tests load instead: the sanitizer build (scripts/nasd-sanitized.sh sets it; native/build-asan). */
const ADDON = process.env.NASD_ADDON ?? `${BUILT}/nasfuse.node`;
/** Preloaded into the next nasd of a reload: a SIGHUP before its JS listens does not end it (native/hup-guard.cc). */
export const HUP_GUARD = `${BUILT}/nas-hup-guard.node`;
let loaded: unknown;

function load(): unknown {
  if (loaded) return loaded;
  try {
    loaded = createRequire(import.meta.url)(ADDON);
    return loaded;
  } catch (e) {
    const msg = (e instanceof Error ? e.message : String(e)).split('\n')[0];
    if (/libfuse3/.test(msg)) throw new UserError(`libfuse 3 is missing (${msg}): apt-get install libfuse3-3`);
    throw new UserError(`cannot load the FUSE binding (${msg}): build it with scripts/build-native.sh (run scripts/setup.sh)`);
  }
}

/** Whether `mod` has a function under each of `names`: what a face of T needs of the module. */
function hasFunctions<T>(mod: unknown, names: ReadonlyArray<keyof T & string>): mod is T {
  return typeof mod === 'object' && mod !== null && names.every((n) => n in mod && typeof Reflect.get(mod, n) === 'function');
}

/**
 * One face of our binding (native/, an N-API addon over libfuse 3): the FUSE mount (fuse-ops/native.ts) or the
 * system calls Node lacks (sys.ts). Its functions `names` are checked to be there, so a binding built from older
 * sources is named, not called; the types the face declares are what native/ implements.
 */
export function addonFace<T>(names: ReadonlyArray<keyof T & string>): T {
  const mod = load();
  if (!hasFunctions<T>(mod, names)) {
    const missing = names.filter((n) => !hasFunctions<T>(mod, [n]));
    throw new UserError(`the FUSE binding lacks ${missing.join(', ')}: it is older than its sources; run scripts/build-native.sh`);
  }
  return mod;
}
