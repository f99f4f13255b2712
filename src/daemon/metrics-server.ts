import http from 'node:http';
import type { Logger } from 'pino';
import { meter } from '../metrics/meter.js';
import { parseListen } from './web-server.js';

/**
 * `/metrics` for Prometheus on a listener of its own (metrics_listen, off by default): GET only, no session and
 * no state change, nothing else served. What it shows (Home names, counts, bytes) is an operator's: bind it to
 * loopback or a management network, not to where agents or users reach.
 */
export async function serveMetrics(listen: string, log: Logger): Promise<http.Server | null> {
  const where = parseListen(listen, 'metrics_listen');
  if (!where) return null;
  meter.enable();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://nasd');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }).end('only GET\n');
      return;
    }
    if (url.pathname !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('nasd serves /metrics here\n');
      return;
    }
    meter.expose().then(
      (body) => res.writeHead(200, { 'content-type': meter.contentType, 'cache-control': 'no-store' }).end(req.method === 'HEAD' ? undefined : body),
      (err) => {
        log.error({ err }, 'cannot gather metrics');
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('cannot gather metrics (see nasd\'s log)\n');
      },
    );
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(where.port, where.host, () => resolve());
    });
  } catch (err) {
    log.warn({ err, listen }, 'metrics cannot listen there (metrics_listen); nasd serves everything else');
    return null;
  }
  const port = (server.address() as { port: number }).port;
  const host = where.host.includes(':') ? `[${where.host}]` : where.host;
  meter.url = `http://${host}:${port}/metrics`;
  log.info({ url: meter.url }, 'metrics ready');
  return server;
}
