/**
 * One backend origin: its connections (one undici `Client` each, one request
 * at a time), those free now, and each tenant's share of them.
 *
 * A tenant may have at most `tenantConnections` requests on connections at
 * once (half of them) and at most `tenantQueue` more waiting in its own line
 * (a quarter of the queue); all tenants' lines together hold at most `queue`.
 * A request past its tenant's line is refused at once ("upstream-share"), one
 * past the whole queue too ("upstream-busy"). A connection that comes free
 * goes to the tenants with a waiting request in turn (round robin), each
 * taking the oldest request of its line; a tenant at its share of connections
 * waits out of turn until one of its own requests ends. So a tenant that
 * floods a slow backend holds at most half its connections and waits behind
 * itself: another tenant finds a connection at once, or gets the next one.
 *
 * The free connections are kept here, in a list, rather than in an undici
 * `Pool`: every exchange is counted from start to end (for the bounds
 * above), so it is known when a connection is free; the `Pool` would scan
 * its clients for one on every request. The usual request costs a map lookup
 * and two counter updates; only a request that must wait is given an entry
 * in its tenant's line. A tenant's share is kept while idle (no allocation
 * per request) and the idle ones are swept when their number doubles.
 */
import { Client } from 'undici'
import type { Dispatcher } from 'undici'

/** A request to a backend: the handler of its answer, told which connection carries it (to give it back). */
export interface UpstreamExchange extends Dispatcher.DispatchHandler {
  connection: Client | null
}

/** Why a request was not taken: its tenant's line is full, or every line together is. */
export type UpstreamRefusal = 'upstream-share' | 'upstream-busy'

export interface BackendBounds {
  connections: number
  queue: number
  tenantConnections: number
  tenantQueue: number
}

/** Idle shares are swept once the map holds this many, or twice as many as after the last sweep. */
const SWEEP_AT_LEAST = 1024

interface Waiting {
  options: Dispatcher.DispatchOptions
  exchange: UpstreamExchange
}

/** One tenant's part of one backend: its requests on connections, and those waiting in its line. */
export class BackendShare {
  running = 0
  /** Oldest first. */
  readonly waiting: Waiting[] = []
  /** In the backend's turn order (it has a waiting request and may take a connection). */
  inTurn = false
  nextInTurn: BackendShare | null = null

  constructor(
    readonly tenant: string,
    readonly backend: Backend,
  ) {}

  /** Sends on a free connection when the tenant is within its share, else waits in its line. */
  dispatch(options: Dispatcher.DispatchOptions, exchange: UpstreamExchange): void {
    this.backend.dispatch(this, options, exchange)
  }
}

export class Backend {
  private readonly connections = new Set<Client>()
  private readonly free: Client[] = []
  private readonly shares = new Map<string, BackendShare>()
  private sweepAt = SWEEP_AT_LEAST
  /** Requests waiting, every tenant's together. */
  private waitingCount = 0
  private turnHead: BackendShare | null = null
  private turnTail: BackendShare | null = null
  /** Once closed: a closed Client, which refuses every request given to it (through the handler), so none goes out. */
  private closedConnection: Client | null = null

  constructor(
    readonly origin: string,
    private readonly bounds: BackendBounds,
    private readonly clientOptions: Client.Options,
  ) {}

  /** Tenants whose share is kept now (for tests: idle ones are swept). */
  get tenantCount(): number {
    return this.shares.size
  }

  /** The tenant's share, made at its first request (or its first since it was swept). */
  share(tenant: string): BackendShare {
    let share = this.shares.get(tenant)
    if (share === undefined) {
      if (this.shares.size >= this.sweepAt) this.sweep()
      share = new BackendShare(tenant, this)
      this.shares.set(tenant, share)
    }
    return share
  }

  /** Whether a request of this tenant is taken now (undefined) or refused; a taken one must be dispatched at once. */
  admit(share: BackendShare): UpstreamRefusal | undefined {
    if (this.runsAtOnce(share)) return undefined
    if (share.waiting.length >= this.bounds.tenantQueue) return 'upstream-share'
    if (this.waitingCount >= this.bounds.queue) return 'upstream-busy'
    return undefined
  }

  dispatch(share: BackendShare, options: Dispatcher.DispatchOptions, exchange: UpstreamExchange): void {
    const connection = this.runsAtOnce(share) ? this.take() : undefined
    if (connection !== undefined) {
      this.send(share, connection, options, exchange)
      return
    }
    share.waiting.push({ options, exchange })
    this.waitingCount++
    if (share.running < this.bounds.tenantConnections) this.enterTurn(share)
  }

  /**
   * The exchange has ended: its connection goes to the next tenant in turn,
   * or back to the free list. The waiting request is given to it once undici
   * has returned from the callback that ended the exchange (a microtask
   * later): undici may be failing every request of the connection in a loop,
   * and a request given to it meanwhile would break the loop's own checks.
   */
  finished(share: BackendShare, exchange: UpstreamExchange): void {
    const { connection } = exchange
    exchange.connection = null
    if (connection === null) return
    share.running--
    if (share.waiting.length > 0 && share.running < this.bounds.tenantConnections) this.enterTurn(share)
    const next = this.leaveTurn()
    if (next === undefined) {
      if (this.connections.has(connection)) this.free.push(connection)
      return
    }
    const waited = next.waiting.shift()!
    this.waitingCount--
    // Counted as running from now: the connection is its.
    next.running++
    if (next.waiting.length > 0 && next.running < this.bounds.tenantConnections) this.enterTurn(next)
    queueMicrotask(() => {
      if (this.connections.has(connection)) {
        this.write(connection, waited.options, waited.exchange)
        return
      }
      // Retired meanwhile (its connection failed): another connection, or a new one, else first in its line again.
      next.running--
      const other = this.take()
      if (other !== undefined) this.send(next, other, waited.options, waited.exchange)
      else this.waitFirst(next, waited)
    })
  }

  /** Closes every connection once its request is answered; a request given to the backend from now on is refused (502). */
  async close(): Promise<void> {
    this.closedConnection = new Client(this.origin)
    await Promise.all([this.closedConnection, ...this.connections].map((connection) => connection.close()))
  }

  /** Within its share of connections, nothing of its own waiting before it, and a connection to be had. */
  private runsAtOnce(share: BackendShare): boolean {
    return (
      share.running < this.bounds.tenantConnections &&
      share.waiting.length === 0 &&
      (this.closedConnection !== null || this.free.length > 0 || this.connections.size < this.bounds.connections)
    )
  }

  private take(): Client | undefined {
    return this.closedConnection ?? this.free.pop() ?? this.open()
  }

  private open(): Client | undefined {
    if (this.connections.size >= this.bounds.connections) return undefined
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

  private send(share: BackendShare, connection: Client, options: Dispatcher.DispatchOptions, exchange: UpstreamExchange): void {
    share.running++
    this.write(connection, options, exchange)
  }

  private write(connection: Client, options: Dispatcher.DispatchOptions, exchange: UpstreamExchange): void {
    exchange.connection = connection
    // A closed Client refuses through the handler (onResponseError), which releases the exchange: nothing is lost.
    connection.dispatch(options, exchange)
  }

  /** A request that had already waited its turn, back at the head of its line and its tenant first in turn. */
  private waitFirst(share: BackendShare, waited: Waiting): void {
    share.waiting.unshift(waited)
    this.waitingCount++
    if (share.running >= this.bounds.tenantConnections || share.inTurn) return
    share.inTurn = true
    share.nextInTurn = this.turnHead
    this.turnHead = share
    this.turnTail ??= share
  }

  private enterTurn(share: BackendShare): void {
    if (share.inTurn) return
    share.inTurn = true
    if (this.turnTail === null) this.turnHead = share
    else this.turnTail.nextInTurn = share
    this.turnTail = share
  }

  /** The next tenant in turn that may take a connection now; those that reached their share meanwhile drop out of turn. */
  private leaveTurn(): BackendShare | undefined {
    for (let share = this.turnHead; share !== null; share = this.turnHead) {
      this.turnHead = share.nextInTurn
      if (this.turnHead === null) this.turnTail = null
      share.nextInTurn = null
      share.inTurn = false
      if (share.waiting.length > 0 && share.running < this.bounds.tenantConnections) return share
    }
    return undefined
  }

  /** Forgets the tenants with nothing running or waiting; at most twice as many are kept as were busy. */
  private sweep(): void {
    for (const [tenant, share] of this.shares) if (share.running === 0 && share.waiting.length === 0) this.shares.delete(tenant)
    this.sweepAt = Math.max(SWEEP_AT_LEAST, 2 * this.shares.size)
  }
}
