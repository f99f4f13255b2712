import { chromium, type Browser, type BrowserServer } from 'playwright-core';

/** Debian's chromium, driven by playwright-core: a browser server this test process connects to. */
export interface Chromium {
  server: BrowserServer;
  browser: Browser;
}

export async function launchChromium(): Promise<Chromium> {
  const server = await chromium.launchServer({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    return { server, browser: await chromium.connect(server.wsEndpoint()) };
  } catch (err) {
    await stopChromium({ server });
    throw err;
  }
}

/** Closed, and its process killed by pid whatever happens (a browser that hangs on close holds the test run). */
export async function stopChromium(c: Partial<Chromium> | undefined): Promise<void> {
  await c?.browser?.close().catch(() => undefined);
  const pid = c?.server?.process().pid;
  await c?.server?.close().catch(() => undefined);
  try {
    if (pid) process.kill(pid, 'SIGKILL');
  } catch {
    // closed already
  }
}
