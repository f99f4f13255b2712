import { Counter, Gauge, Histogram } from 'prom-client';
import { meter } from '../metrics/meter.js';

/**
 * The cluster's metrics, beside nasd's own in the same registry (`--metrics-listen`): who writes each Home,
 * the queue, how far this host's main lags the server's, fail-overs, and etcd's latency. Made on first use
 * when metrics are on; nothing otherwise.
 */
interface Instruments {
  writer: Gauge<'home'>;
  queue: Gauge<'home'>;
  lag: Gauge<'home'>;
  failovers: Counter<'home'>;
  published: Counter<'home'>;
  etcd: Histogram<string>;
}

let m: Instruments | null = null;

function instruments(): Instruments | null {
  if (!meter.enabled) return null;
  if (m) return m;
  const registers = [meter.enable()];
  m = {
    writer: new Gauge({ name: 'nas_cluster_writer', help: 'Whether this host is the merge writer of a Home (1) or not (0)', labelNames: ['home'], registers }),
    queue: new Gauge({ name: 'nas_cluster_queue_depth', help: 'Proposals queued in etcd for a Home\'s merge writer, as last seen', labelNames: ['home'], registers }),
    lag: new Gauge({ name: 'nas_cluster_main_lag_seconds', help: 'How long this host\'s main last trailed the main published for a Home (0: current)', labelNames: ['home'], registers }),
    failovers: new Counter({ name: 'nas_cluster_failovers_total', help: 'Times this host became a Home\'s merge writer after another host held it', labelNames: ['home'], registers }),
    published: new Counter({ name: 'nas_cluster_published_total', help: 'Batches this host pushed to the git server and published as a Home\'s writer', labelNames: ['home'], registers }),
    etcd: new Histogram({ name: 'nas_cluster_etcd_seconds', help: 'Latency of a read from etcd (status and reconcile passes)', buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], registers }),
  };
  return m;
}

export const clusterMeter = {
  writer(home: string, held: boolean): void {
    instruments()?.writer.set({ home }, held ? 1 : 0);
  },
  failover(home: string): void {
    instruments()?.failovers.inc({ home });
  },
  published(home: string): void {
    instruments()?.published.inc({ home });
  },
  queue(home: string, depth: number): void {
    instruments()?.queue.set({ home }, depth);
  },
  lag(home: string, seconds: number): void {
    instruments()?.lag.set({ home }, seconds);
  },
  etcd(seconds: number): void {
    instruments()?.etcd.observe(seconds);
  },
};
