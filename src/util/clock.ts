import fs from 'node:fs/promises';
import os from 'node:os';

/** How far the wall clock may run ahead of the time this process saw pass between two readings before it is a jump. */
const JUMP_MS = 60_000;

/**
 * Milliseconds since boot, suspended time included (CLOCK_BOOTTIME): no one can set it. libuv reads /proc/uptime,
 * or, where that is hidden (the unit's ProcSubset=pid), asks CLOCK_BOOTTIME itself (whole seconds: enough for a jump
 * of a minute).
 */
async function sinceBoot(): Promise<number> {
  return os.uptime() * 1000;
}

/**
 * The wall clock as branch TTLs read it, and whether it jumped: each reading is compared with the time since boot
 * that passed since the last one (which no one can set, and which counts a suspended machine's sleep as time
 * passed), so a forward step of the wall clock (date -s, a bad NTP server) shows as the difference.
 *
 * `offsetFile` is for tests only (nasd's hidden --test-clock-offset-file): milliseconds added to the wall clock, so
 * a test steps nasd's clock without stepping the machine's, which needs CAP_SYS_TIME and would move every other
 * process's clock too. Only this clock reads it: what it steps is exactly what TTLs and grace periods see.
 */
export class WallClock {
  private last: { wall: number; boot: number } | null = null;

  constructor(private readonly offsetFile?: string) {}

  async now(): Promise<number> {
    if (!this.offsetFile) return Date.now();
    const offset = Number((await fs.readFile(this.offsetFile, 'utf8').catch(() => '0')).trim());
    return Date.now() + (Number.isFinite(offset) ? offset : 0);
  }

  /** The time now, and how far (ms) the wall clock ran ahead of the time since boot since the last reading: 0 when it did not jump. */
  async read(): Promise<{ now: number; jumped: number }> {
    const now = await this.now();
    const boot = await sinceBoot();
    const last = this.last;
    this.last = { wall: now, boot };
    if (!last) return { now, jumped: 0 };
    const ahead = now - last.wall - (boot - last.boot);
    return { now, jumped: ahead > JUMP_MS ? Math.round(ahead) : 0 };
  }
}
