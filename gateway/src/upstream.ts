/**
 * The backends, as undici pools: one keep-alive pool per upstream origin,
 * bounded. A pool has `connections` connections and lets at most `queue`
 * more requests wait for one; past that a request is refused at once
 * ("upstream-busy", 503) rather than queued without end, so a slow or
 * flooded backend cannot make the gateway hold unbounded work. Bodies reach
 * this point already complete (the forwarder buffers them), so a connection
 * is held only for the backend's own time, never a client's.
 *
 * Transport failures are mapped in one place: too slow is 504, anything
 * else (refused, reset, closed) is 502.
 *
 * An `https://` upstream is reached over TLS 1.2 or newer, its certificate
 * checked against the route's `tls.caFile` (else the system's CAs) and its
 * name (the upstream's host, or `tls.serverName`), with the route's client
 * certificate when it has one (route-map.ts).
 */
import { Pool } from 'undici'
import type { UpstreamTls } from './route-map.js'

export interface UpstreamOptions {
  connections: number
  queue: number
  /** Response headers, and each gap between body chunks, must come within this (then 504). */
  timeoutMs: number
  keepAliveTimeoutMs?: number
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT'])

/** The one place transport failures are mapped. */
export function classifyTransportError(error: unknown): 'upstream-timeout' | 'upstream-error' {
  for (let current: unknown = error, depth = 0; typeof current === 'object' && current !== null && depth < 5; depth++) {
    const { code, cause } = current as { code?: unknown; cause?: unknown }
    if (typeof code === 'string' && TIMEOUT_CODES.has(code)) return 'upstream-timeout'
    current = cause
  }
  return 'upstream-error'
}

/** One backend origin: its pool, and the requests in flight on it (dispatched, not yet finished). */
export interface Backend {
  readonly origin: string
  readonly pool: Pool
  inFlight: number
}

export class Upstreams {
  private readonly backends = new Map<string, Backend>()

  constructor(
    private readonly options: UpstreamOptions,
    /** TLS settings per https:// origin (upstreamTls of the route map); an origin without any uses the system's CAs. */
    private readonly tls: ReadonlyMap<string, UpstreamTls> = new Map(),
  ) {}

  /** undici's connect options for one origin: certificate checks (never off), CA, client certificate, name. */
  private connectOptions(origin: string): Pool.Options['connect'] {
    if (!origin.startsWith('https:')) return undefined
    const tls = this.tls.get(origin)
    return {
      rejectUnauthorized: true,
      minVersion: 'TLSv1.2',
      ...(tls?.ca === undefined ? {} : { ca: tls.ca }),
      ...(tls?.cert === undefined || tls.key === undefined ? {} : { cert: tls.cert, key: tls.key }),
      ...(tls?.serverName === undefined ? {} : { servername: tls.serverName }),
    }
  }

  private backend(origin: string): Backend {
    let backend = this.backends.get(origin)
    if (backend === undefined) {
      const pool = new Pool(origin, {
        connections: this.options.connections,
        pipelining: 1,
        keepAliveTimeout: this.options.keepAliveTimeoutMs ?? 30_000,
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
        ...(origin.startsWith('https:') ? { connect: this.connectOptions(origin) } : {}),
      })
      backend = { origin, pool, inFlight: 0 }
      this.backends.set(origin, backend)
    }
    return backend
  }

  /**
   * A slot on the origin's pool for one request, or undefined when its
   * connections and queue are full; whoever takes it calls `release` once the
   * exchange has ended.
   */
  acquire(origin: string): Backend | undefined {
    const backend = this.backend(origin)
    if (backend.inFlight >= this.options.connections + this.options.queue) return undefined
    backend.inFlight++
    return backend
  }

  release(backend: Backend): void {
    backend.inFlight--
  }

  async close(): Promise<void> {
    await Promise.all([...this.backends.values()].map((backend) => backend.pool.close()))
  }
}
