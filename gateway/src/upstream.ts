/**
 * The backends: for each upstream origin, up to `connections` keep-alive
 * connections (one undici `Client` each, one request at a time), and at most
 * `queue` more requests waiting for one; past that a request is refused at
 * once ("upstream-busy", 503) rather than queued without end, so a slow or
 * flooded backend cannot make the gateway hold unbounded work. Bodies reach
 * this point already complete (the forwarder buffers them), so a connection
 * is held only for the backend's own time, never a client's.
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
 * Transport failures are mapped in one place: too slow is 504, anything
 * else (refused, reset, closed) is 502.
 *
 * An `https://` upstream is reached over TLS 1.2 or newer, its certificate
 * checked against the route's `tls.caFile` (else the system's CAs) and its
 * name (the upstream's host, or `tls.serverName`), with the route's client
 * certificate when it has one (route-map.ts).
 */
import { Client } from 'undici'
import type { Dispatcher } from 'undici'
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

/** A request to a backend: the handler of its answer, told which connection carries it (to give it back). */
export interface UpstreamExchange extends Dispatcher.DispatchHandler {
  connection: Client | null
}

/** One backend origin: its connections, those free now, and the requests waiting for one. */
export class Backend {
  /** Requests taken (Upstreams.acquire) and not yet ended (Upstreams.release): on a connection or waiting for one. */
  inFlight = 0
  private readonly connections = new Set<Client>()
  private readonly free: Client[] = []
  private readonly waiting: Array<{ options: Dispatcher.DispatchOptions; exchange: UpstreamExchange }> = []
  /** Once closed: a closed Client, which refuses every request given to it (through the handler), so none goes out. */
  private closedConnection: Client | null = null

  constructor(
    readonly origin: string,
    private readonly limit: number,
    private readonly clientOptions: Client.Options,
  ) {}

  /** Sends on a free connection, else on a new one while there are fewer than the limit, else once one is free. */
  dispatch(options: Dispatcher.DispatchOptions, exchange: UpstreamExchange): void {
    this.place(options, exchange, 'last')
  }

  /**
   * The exchange on `connection` has ended: the connection goes back to the
   * free list, or to the request that has waited longest. That request is
   * given to it once undici has returned from the callback that ended the
   * exchange (a microtask later): undici may be failing every request of the
   * connection in a loop, and a request given to it meanwhile would break
   * the loop's own checks. undici writes it once it has checked the
   * connection is still open, as its own pool would.
   */
  finished(connection: Client): void {
    const next = this.waiting.shift()
    if (next === undefined) {
      if (this.connections.has(connection)) this.free.push(connection)
      return
    }
    queueMicrotask(() => {
      // Retired meanwhile (its connection failed): the request takes another, or a new one, still first in line.
      if (this.connections.has(connection)) this.send(connection, next.options, next.exchange)
      else this.place(next.options, next.exchange, 'first')
    })
  }

  /** Closes every connection once its request is answered; a request given to the backend from now on is refused (502). */
  async close(): Promise<void> {
    this.closedConnection = new Client(this.origin)
    await Promise.all([this.closedConnection, ...this.connections].map((connection) => connection.close()))
  }

  /** On a connection now, or in line for one: last, or first for a request that had already waited its turn. */
  private place(options: Dispatcher.DispatchOptions, exchange: UpstreamExchange, inLine: 'first' | 'last'): void {
    const connection = this.closedConnection ?? this.free.pop() ?? this.open()
    if (connection !== undefined) this.send(connection, options, exchange)
    else if (inLine === 'last') this.waiting.push({ options, exchange })
    else this.waiting.unshift({ options, exchange })
  }

  private open(): Client | undefined {
    if (this.connections.size >= this.limit) return undefined
    const connection = new Client(this.origin, this.clientOptions)
    connection.on('connectionError', () => this.retire(connection))
    this.connections.add(connection)
    return connection
  }

  /**
   * A connection that could not connect is not used again, as undici's own
   * pool does: after some failures (a certificate for another name) its
   * Client counts a request as running for ever, would send nothing more and
   * could not be closed. It is dropped, not closed; the next request opens a
   * new one.
   */
  private retire(connection: Client): void {
    this.connections.delete(connection)
    const index = this.free.indexOf(connection)
    if (index !== -1) this.free.splice(index, 1)
  }

  private send(connection: Client, options: Dispatcher.DispatchOptions, exchange: UpstreamExchange): void {
    exchange.connection = connection
    // A closed Client refuses through the handler (onResponseError), which releases the exchange: nothing is lost.
    connection.dispatch(options, exchange)
  }
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
      minVersion: 'TLSv1.2',
      ...(tls?.ca === undefined ? {} : { ca: tls.ca }),
      ...(tls?.cert === undefined || tls.key === undefined ? {} : { cert: tls.cert, key: tls.key }),
      ...(tls?.serverName === undefined ? {} : { servername: tls.serverName }),
    }
  }

  private backend(origin: string): Backend {
    let backend = this.backends.get(origin)
    if (backend === undefined) {
      backend = new Backend(origin, this.options.connections, {
        pipelining: 1,
        keepAliveTimeout: this.options.keepAliveTimeoutMs ?? 30_000,
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
        ...(origin.startsWith('https:') ? { connect: this.connectOptions(origin) } : {}),
      })
      this.backends.set(origin, backend)
      // Closed already: the new backend refuses its requests too (close marks it at once, before awaiting).
      if (this.closed) void backend.close()
    }
    return backend
  }

  /**
   * A place for one request to the origin, or undefined when its connections
   * and queue are full; whoever takes it sends the request with the backend's
   * `dispatch` and calls `release` once the exchange has ended.
   */
  acquire(origin: string): Backend | undefined {
    const backend = this.backend(origin)
    if (backend.inFlight >= this.options.connections + this.options.queue) return undefined
    backend.inFlight++
    return backend
  }

  release(backend: Backend, exchange: UpstreamExchange): void {
    backend.inFlight--
    const { connection } = exchange
    exchange.connection = null
    if (connection !== null) backend.finished(connection)
  }

  async close(): Promise<void> {
    this.closed = true
    await Promise.all([...this.backends.values()].map((backend) => backend.close()))
  }
}
