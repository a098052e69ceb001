/**
 * The few Prometheus metrics `ctxdedup serve` exposes, rendered in the text exposition format
 * (version 0.0.4). Kept dependency-free: counters and one histogram.
 * @module
 */

/** Upper bounds (seconds) of the request latency histogram. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface Histogram {
  counts: number[];
  sum: number;
  count: number;
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function labels(pairs: Record<string, string>): string {
  const parts = Object.entries(pairs).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

/** Counters and the latency histogram of one server. */
export class ServerMetrics {
  readonly itemsNew = { value: 0 };
  readonly itemsDuplicate = { value: 0 };
  /** Near duplicates (also counted in `itemsDuplicate`). */
  readonly itemsNearDuplicate = { value: 0 };
  readonly batches = { value: 0 };
  readonly storeErrors = { value: 0 };
  readonly messagesDeduped = { value: 0 };
  #requests = new Map<string, { labels: Record<string, string>; value: number }>();
  #latency = new Map<string, Histogram>();

  /** Records one finished HTTP request. */
  observeRequest(route: string, method: string, status: number, seconds: number): void {
    const key = `${route}\u0000${method}\u0000${status}`;
    const counter = this.#requests.get(key) ?? { labels: { route, method, status: String(status) }, value: 0 };
    counter.value++;
    this.#requests.set(key, counter);
    let histogram = this.#latency.get(route);
    if (histogram === undefined) {
      histogram = { counts: LATENCY_BUCKETS.map(() => 0), sum: 0, count: 0 };
      this.#latency.set(route, histogram);
    }
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) if (seconds <= LATENCY_BUCKETS[i]!) histogram.counts[i]!++;
    histogram.sum += seconds;
    histogram.count++;
  }

  /** The metrics in Prometheus text format. */
  render(): string {
    const out: string[] = [];
    const counter = (name: string, help: string, samples: [Record<string, string>, number][]): void => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
      for (const [l, v] of samples) out.push(`${name}${labels(l)} ${v}`);
    };
    counter('ctxdedup_ingest_items_total', 'Items ingested, by decision.', [
      [{ status: 'new' }, this.itemsNew.value],
      [{ status: 'duplicate' }, this.itemsDuplicate.value],
    ]);
    counter('ctxdedup_ingest_near_duplicates_total', 'Items reported as near duplicates (also counted as duplicate above).', [
      [{}, this.itemsNearDuplicate.value],
    ]);
    counter('ctxdedup_ingest_batches_total', 'Batches recorded.', [[{}, this.batches.value]]);
    counter('ctxdedup_store_errors_total', 'Batches that failed in the store (nothing recorded).', [[{}, this.storeErrors.value]]);
    counter('ctxdedup_messages_dedupe_requests_total', 'Conversations processed by POST /v1/messages/dedupe.', [[{}, this.messagesDeduped.value]]);
    counter(
      'ctxdedup_http_requests_total',
      'HTTP requests, by route, method and status.',
      [...this.#requests.values()].map((c) => [c.labels, c.value]),
    );
    const name = 'ctxdedup_http_request_duration_seconds';
    out.push(`# HELP ${name} HTTP request latency.`, `# TYPE ${name} histogram`);
    for (const [route, h] of this.#latency) {
      LATENCY_BUCKETS.forEach((le, i) => {
        out.push(`${name}_bucket${labels({ route, le: String(le) })} ${h.counts[i]}`);
      });
      out.push(`${name}_bucket${labels({ route, le: '+Inf' })} ${h.count}`);
      out.push(`${name}_sum${labels({ route })} ${h.sum}`);
      out.push(`${name}_count${labels({ route })} ${h.count}`);
    }
    return `${out.join('\n')}\n`;
  }
}
