/**
 * Verifying a key by its hash: the in-process cache, then Redis, then
 * Postgres. A warm key costs one Map lookup; Postgres is shielded from
 * floods of unknown keys by single-flight per hash, negative caching (in
 * process and in Redis) and a bound on lookups in flight.
 *
 * An "active" entry from Redis is believed only while this replica is
 * current with the invalidation log (see key-cache.ts); otherwise Postgres
 * answers. A Redis entry that fails its MAC is counted and ignored. A failure
 * of Redis falls back to Postgres; a failure of Postgres is the outcome
 * `unavailable` (503), never "the key is invalid" and never a pass.
 *
 * A revoked key is refused from whatever says so, and its owner (for its
 * usage) read from Postgres only when nothing held names it: a revoker's
 * Redis marker, or a message that ended it before the log did (ownerOf).
 */
import { withDeadline } from '@scoped/shared/deadline'
import { clientGroup } from '@scoped/shared/ip-address'
import type { Logger } from '@scoped/shared/logger'
import type { EndedKeyState, KeyState, RevokedKeyState } from '@scoped/shared/key-state'
import { stateVersion } from '@scoped/shared/key-state'
import type { KeyCache } from './key-cache.js'
import type { GatewayMetrics } from './metrics.js'
import type { SharedKeyCache } from './redis-key-cache.js'

export type Verification = KeyState | { status: 'unavailable' }

/** What the gate and the forwarder ask of the verifier: KeyVerifier here, a fake of it in their fast tests. */
export interface Verifier {
  /** The key cache's generation: when it moved since a key was verified, the key is checked again before forwarding. */
  readonly generation: number
  /** The hot path: a state from the in-process cache, or undefined. */
  cached(hash: string, now: number): KeyState | undefined
  /** Whether this replica is current with the invalidation log (monotonic `now`): if not, a key is checked again before forwarding. */
  isCurrent(now: number): boolean
  /**
   * Past the in-process cache: Redis, then Postgres; `unavailable` when they cannot answer, never a pass.
   * With a client address, the lookup counts against that client's slots; without, it does not.
   */
  verify(hash: string, client?: string): Promise<Verification>
  /**
   * A revoked key held without its owner (an invalidation from Redis, before the log said whose it was):
   * the owner from Postgres, so the refusal is counted for it. Always an ended state (never a pass): `held`
   * when Postgres cannot say.
   */
  ownerOf(hash: string, held: RevokedKeyState): Promise<EndedKeyState>
}

/** The source of truth (Postgres: lookupKeyByHash). */
export interface KeyStore {
  lookup(hash: string): Promise<KeyState>
}

export interface KeyVerifierDeps {
  store: KeyStore
  /** Redis, when configured. */
  shared: SharedKeyCache | null
  cache: KeyCache
  metrics: GatewayMetrics
  log: Logger
  /** Monotonic milliseconds, the clock of the cache. */
  now?: () => number
  /** Lookups past the in-process cache allowed in flight at once; beyond it, `unavailable`. */
  maxPendingLookups?: number
  /** Of those, how many one client (an IPv6 client by its /64) may hold, so that one client's flood of unknown keys cannot take them all. */
  maxPendingPerClient?: number
  /** A store lookup slower than this is `unavailable`. */
  lookupTimeoutMs?: number
}

const UNAVAILABLE: Verification = Object.freeze({ status: 'unavailable' })

interface Flight {
  promise: Promise<Verification>
  generation: number
}

/** After a store lookup failed, owners are not looked up for this long: a revoked key's refusals go out at once, uncounted. */
const OWNER_BACKOFF_MS = 1_000

export class KeyVerifier implements Verifier {
  private readonly flights = new Map<string, Flight>()
  private readonly owners = new Map<string, Promise<EndedKeyState>>()
  private pending = 0
  private readonly pendingByClient = new Map<string, number>()
  private readonly now: () => number
  private readonly maxPending: number
  private readonly maxPerClient: number
  private readonly timeoutMs: number
  /** The latest store lookup that failed (on this verifier's clock), and why: readiness reports it (readiness.ts). */
  lastStoreFailure: { at: number; message: string } | undefined

  constructor(private readonly deps: KeyVerifierDeps) {
    this.now = deps.now ?? (() => performance.now())
    this.maxPending = deps.maxPendingLookups ?? 512
    this.maxPerClient = deps.maxPendingPerClient ?? 16
    this.timeoutMs = deps.lookupTimeoutMs ?? 5_000
  }

  /** The cache's generation: when it moved since a key was verified, the key is checked again before forwarding. */
  get generation(): number {
    return this.deps.cache.generation
  }

  isCurrent(now: number): boolean {
    return this.deps.cache.isCurrent(now)
  }

  /** The hot path: a state from the in-process cache, or undefined. */
  cached(hash: string, now: number): KeyState | undefined {
    const state = this.deps.cache.get(hash, now)
    this.deps.metrics.countCache('memory', state === undefined ? 'miss' : 'hit')
    return state
  }

  /**
   * Looks a key up past the in-process cache. Concurrent lookups of one hash
   * share a flight; a joiner takes a shared "active" only when the cache is
   * trusted and nothing was invalidated since the flight began, otherwise it
   * looks again: a request that arrives after a revoke has returned must not
   * be answered by a lookup that started before it.
   */
  verify(hash: string, address?: string): Promise<Verification> {
    // Joining a lookup already in flight costs the stores nothing: only new lookups count against the client.
    if (this.flights.has(hash)) return this.join(hash)
    // A key the issued-key filter vouches for is looked up without a client: it cannot be part of a flood of guesses.
    if (address === undefined) return this.join(hash)
    const client = clientGroup(address)
    const held = this.pendingByClient.get(client) ?? 0
    if (held >= this.maxPerClient) return Promise.resolve(UNAVAILABLE)
    this.pendingByClient.set(client, held + 1)
    return this.join(hash).finally(() => {
      const left = (this.pendingByClient.get(client) ?? 1) - 1
      if (left <= 0) this.pendingByClient.delete(client)
      else this.pendingByClient.set(client, left)
    })
  }

  private join(hash: string): Promise<Verification> {
    const flight = this.flights.get(hash)
    if (flight !== undefined) {
      return flight.promise.then((result) =>
        result.status !== 'active' || (flight.generation === this.deps.cache.generation && this.deps.cache.isCurrent(this.now())) ? result : this.load(hash),
      )
    }
    const started: Flight = { promise: this.load(hash), generation: this.deps.cache.generation }
    this.flights.set(hash, started)
    void started.promise.finally(() => {
      if (this.flights.get(hash) === started) this.flights.delete(hash)
    })
    return started.promise
  }

  ownerOf(hash: string, held: RevokedKeyState): Promise<EndedKeyState> {
    const failure = this.lastStoreFailure
    if (failure !== undefined && this.now() - failure.at < OWNER_BACKOFF_MS) return Promise.resolve(held)
    let flight = this.owners.get(hash)
    if (flight === undefined) {
      const started = this.loadOwner(hash, held)
      flight = started
      this.owners.set(hash, started)
      void started.finally(() => {
        if (this.owners.get(hash) === started) this.owners.delete(hash)
      })
    }
    return flight
  }

  private async loadOwner(hash: string, held: RevokedKeyState): Promise<EndedKeyState> {
    if (this.pending >= this.maxPending) return held
    this.pending++
    try {
      const state = await this.readStore(hash, this.deps.cache.generation)
      // Only an ended state can answer: a key never leaves them, so anything else is not believed.
      if (state === undefined || (state.status !== 'revoked' && state.status !== 'deleted')) return held
      this.deps.cache.fill(hash, state, this.deps.cache.generation, this.now())
      return state
    } finally {
      this.pending--
    }
  }

  private async load(hash: string): Promise<Verification> {
    if (this.pending >= this.maxPending) {
      this.deps.log.warn({ pending: this.pending }, 'too many key lookups in flight; refusing until they drain')
      return UNAVAILABLE
    }
    this.pending++
    try {
      const generation = this.deps.cache.generation
      const shared = await this.readShared(hash)
      let state = shared ?? (await this.readStore(hash, generation))
      // A revoker's marker does not say whose the key was: Postgres does, and its refusals are counted for it
      // (an ended key never comes back, so only an ended answer replaces the marker).
      if (shared?.status === 'revoked' && shared.tenant === undefined) {
        const stored = await this.readStore(hash, generation)
        if (stored?.status === 'revoked' || stored?.status === 'deleted') state = stored
      }
      if (state !== undefined) this.deps.cache.fill(hash, state, generation, this.now())
      return state ?? UNAVAILABLE
    } finally {
      this.pending--
    }
  }

  private async readShared(hash: string): Promise<KeyState | undefined> {
    const shared = this.deps.shared
    if (shared === null) return undefined
    try {
      this.deps.metrics.countRoundTrip('redis')
      const state = await shared.read(hash)
      if (state === 'forged') {
        this.deps.metrics.countForged('entry')
        this.deps.log.warn('ignored a Redis key cache entry that failed its check (forged, moved or malformed)')
        return undefined
      }
      // An active entry may predate a revoke or a change: believed only while current, and never when older than a change heard of.
      const believed = state !== undefined && this.deps.cache.believesShared(hash, state, this.now()) ? state : undefined
      this.deps.metrics.countCache('redis', believed === undefined ? 'miss' : 'hit')
      return believed
    } catch (error) {
      // Redis is a cache: when it fails, Postgres answers.
      this.deps.metrics.countCache('redis', 'error')
      this.deps.log.debug({ err: error }, 'redis key cache unavailable; reading Postgres')
      return undefined
    }
  }

  private async readStore(hash: string, generationAtStart: number): Promise<KeyState | undefined> {
    let state: KeyState
    try {
      this.deps.metrics.countRoundTrip('postgres')
      state = await withDeadline(this.deps.store.lookup(hash), this.timeoutMs, 'key lookup')
    } catch (error) {
      this.deps.log.error({ err: error }, 'key store unavailable')
      this.lastStoreFailure = { at: this.now(), message: error instanceof Error ? error.message : String(error) }
      return undefined
    }
    if (this.deps.shared !== null && this.mayWriteBack(hash, state, generationAtStart)) {
      this.deps.metrics.countRoundTrip('redis')
      this.deps.shared.write(hash, state)
    }
    return state
  }

  /**
   * Whether a state read from Postgres may go to Redis for the other replicas: never one read before a
   * change this replica has heard of since (the generation moved, or it is older than a pinned version), nor
   * by a replica that is not current (it may not have heard of one). Other states go as they are (ended
   * ones are final; Redis takes an unknown one only where it has nothing).
   */
  private mayWriteBack(hash: string, state: KeyState, generationAtStart: number): boolean {
    if (state.status !== 'active') return true
    const { cache } = this.deps
    const now = this.now()
    return cache.isCurrent(now) && cache.generation === generationAtStart && !cache.isStale(hash, stateVersion(state), now)
  }
}
