/**
 * The backends: for each upstream origin, up to `connections` keep-alive
 * connections and at most `queue` more requests waiting for one; past that a
 * request is refused at once ("upstream-busy", 503 with Retry-After) rather
 * than queued without end, so a slow or flooded backend cannot make the
 * gateway hold unbounded work. Bodies reach this point already complete (the
 * forwarder buffers them), so a connection is held only for the backend's own
 * time, never a client's.
 *
 * The free connections are kept here, in a list, rather than in an undici
 * `Pool`: the gateway already counts every exchange from start to end (for
 * the bound above), so it knows when a connection is free; the `Pool` finds
 * one by scanning its clients on every request (twice when the first it
 * picks is busy) and learns of a free one from a `drain` event after every
 * answer: work on every request that the list does not need. A connection
 * that could not connect is dropped, as the `Pool` drops it, and a new one
 * made when needed.
 *
 * Each tenant has a share of each backend (upstream-backend.ts): at most half
 * its connections and a quarter of its queue; past that its request is
 * refused at once ("upstream-share", 503 with Retry-After), and a connection
 * that comes free goes to the waiting tenants in turn. The tenant of a
 * request is its key's (`upstreamTenant`).
 *
 * Console requests (`auth: session` routes, no key) never touch the API's
 * connections: they have connections of their own to the same origin (a
 * quarter as many, and a quarter of the queue), so a flood of sign-ins that
 * the backend answers slowly holds only those, and `/v1/agency` on the same
 * backend keeps every one of its connections.
 *
 * Transport failures are mapped in one place: too slow is 504, anything
 * else (refused, reset, closed) is 502.
 *
 * An `https://` upstream is reached over TLS 1.2 or newer (forward-secret
 * AEAD suites only, as the backends pin them too), its certificate
 * checked against the route's `tls.caFile` (else the system's CAs) and its
 * name (the upstream's host, or `tls.serverName`), with the route's client
 * certificate when it has one (route-map.ts).
 */
import type { Client } from 'undici'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { MIN_TLS_VERSION, TLS12_CIPHERS } from '@scoped/shared/tls-ciphers'
import type { UpstreamTls } from './route-map.js'
import type { BackendBounds, BackendShare, UpstreamExchange, UpstreamRefusal } from './upstream-backend.js'
import { Backend } from './upstream-backend.js'

export type { BackendShare, UpstreamExchange, UpstreamRefusal } from './upstream-backend.js'

export interface UpstreamOptions {
  connections: number
  queue: number
  /** Response headers, and each gap between body chunks, must come within this (then 504). */
  timeoutMs: number
  keepAliveTimeoutMs?: number
}

/** The tenant console requests count as, in every backend's shares: one of their own (tenant ids are UUIDs). */
export const CONSOLE_TENANT = 'console'

/**
 * The tenant a request counts against in a backend's shares: the key's
 * sub-account, or its agency for an agency key; a console request (no key,
 * so no tenant) counts as the console's.
 */
export function upstreamTenant(tenant: Tenant | null): string {
  return tenant === null ? CONSOLE_TENANT : (tenant.subAccountId ?? tenant.agencyId)
}

/** Each tenant's share of one backend: half its connections (at least one) and a quarter of its queue (at least one, if it has one). */
export function backendBounds(connections: number, queue: number): BackendBounds {
  return { connections, queue, tenantConnections: Math.max(1, Math.floor(connections / 2)), tenantQueue: Math.ceil(queue / 4) }
}

/** The console's own connections to a backend: a quarter of the API's (at least one) and a quarter of its queue, all the console's. */
export function consoleBounds(connections: number, queue: number): BackendBounds {
  const own = Math.max(1, Math.ceil(connections / 4))
  const waiting = Math.ceil(queue / 4)
  return { connections: own, queue: waiting, tenantConnections: own, tenantQueue: waiting }
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

export class Upstreams {
  private readonly backends = new Map<string, Backend>()
  private closed = false

  constructor(
    private readonly options: UpstreamOptions,
    /** TLS settings per https:// origin (upstreamTls of the route map); an origin without any uses the system's CAs. */
    private readonly tls: ReadonlyMap<string, UpstreamTls> = new Map(),
  ) {}

  /** undici's connect options for one origin: certificate checks (never off), CA, client certificate, name. */
  private connectOptions(origin: string): Client.Options['connect'] {
    if (!origin.startsWith('https:')) return undefined
    const tls = this.tls.get(origin)
    return {
      rejectUnauthorized: true,
      minVersion: MIN_TLS_VERSION,
      ciphers: TLS12_CIPHERS,
      ...(tls?.ca === undefined ? {} : { ca: tls.ca }),
      ...(tls?.cert === undefined || tls.key === undefined ? {} : { cert: tls.cert, key: tls.key }),
      ...(tls?.serverName === undefined ? {} : { servername: tls.serverName }),
    }
  }

  /** The backend of `origin` for API requests, or the console's own one (separate connections to the same origin). */
  private backend(origin: string, forConsole: boolean): Backend {
    const name = forConsole ? `console ${origin}` : origin
    let backend = this.backends.get(name)
    if (backend === undefined) {
      const bounds = (forConsole ? consoleBounds : backendBounds)(this.options.connections, this.options.queue)
      backend = new Backend(origin, bounds, {
        pipelining: 1,
        keepAliveTimeout: this.options.keepAliveTimeoutMs ?? 30_000,
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
        ...(origin.startsWith('https:') ? { connect: this.connectOptions(origin) } : {}),
      })
      this.backends.set(name, backend)
      // Closed already: the new backend refuses its requests too (close marks it at once, before awaiting).
      if (this.closed) void backend.close()
    }
    return backend
  }

  /**
   * A place for one request of `tenant` to the origin, or why there is none
   * (the tenant's line is full, or every line together is); whoever takes it
   * sends the request at once with the share's `dispatch` and calls `release`
   * once the exchange has ended.
   */
  acquire(origin: string, tenant: string): BackendShare | UpstreamRefusal {
    const backend = this.backend(origin, tenant === CONSOLE_TENANT)
    const share = backend.share(tenant)
    return backend.admit(share) ?? share
  }

  release(share: BackendShare, exchange: UpstreamExchange): void {
    share.backend.finished(share, exchange)
  }

  async close(): Promise<void> {
    this.closed = true
    await Promise.all([...this.backends.values()].map((backend) => backend.close()))
  }
}
