/**
 * The in-process cache of key states, keyed by key hash.
 *
 * Two kinds of entries, with different trust:
 * - settled states (unknown, revoked, deleted) can never become valid, so they
 *   are served whenever present (until their TTL);
 * - active states are served only while the cache is trusted: the invalidation
 *   listener trusts it while its Redis subscription is healthy, i.e. subscribed
 *   and a heartbeat answered within `staleAfterMs`. Without Redis it is never
 *   trusted, so no active key is ever kept (every check of a valid key reads
 *   Postgres). Losing trust, or regaining it, empties the active entries.
 *
 * `generation` changes whenever entries are dropped or trust changes; a fill
 * is skipped when the generation moved while its lookup was in flight, so a
 * lookup that raced a revoke can never put the key back.
 *
 * Times are milliseconds of a monotonic clock (performance.now()).
 */
import type { CachedKeyState } from '@scoped/shared/key-invalidation'

interface Entry {
  state: CachedKeyState
  expiresAt: number
}

export interface KeyCacheOptions {
  /** How long an active entry is served at most, even while trusted (bounds the effect of changes made outside the revoke protocol). */
  activeTtlMs: number
  /** How long an unknown key is remembered. */
  unknownTtlMs: number
  /** How long a revoked or deleted key is remembered. */
  terminalTtlMs: number
  /** Entries per kind; the oldest is dropped beyond it. */
  maxEntries: number
  /** A trusted cache goes untrusted when no heartbeat was seen for this long. */
  staleAfterMs: number
}

export const defaultKeyCacheOptions: KeyCacheOptions = Object.freeze({
  activeTtlMs: 60_000,
  unknownTtlMs: 60_000,
  terminalTtlMs: 600_000,
  maxEntries: 100_000,
  staleAfterMs: 2_500,
})

function setBounded(map: Map<string, Entry>, hash: string, entry: Entry, max: number): void {
  map.delete(hash)
  if (map.size >= max) {
    const oldest = map.keys().next()
    if (oldest.done !== true) map.delete(oldest.value)
  }
  map.set(hash, entry)
}

export class KeyCache {
  /** Changes whenever an entry is dropped or trust changes. */
  generation = 0
  private readonly active = new Map<string, Entry>()
  private readonly settled = new Map<string, Entry>()
  private trusted = false
  private heartbeatAt = 0

  constructor(private readonly options: KeyCacheOptions = defaultKeyCacheOptions) {}

  /** Whether active entries may be served now; notices a missed heartbeat. */
  isTrusted(now: number): boolean {
    if (!this.trusted) return false
    if (now - this.heartbeatAt <= this.options.staleAfterMs) return true
    this.distrust()
    return false
  }

  get(hash: string, now: number): CachedKeyState | undefined {
    const active = this.active.get(hash)
    if (active !== undefined) {
      if (active.expiresAt > now && this.isTrusted(now)) return active.state
      this.active.delete(hash)
    }
    const settled = this.settled.get(hash)
    if (settled === undefined) return undefined
    if (settled.expiresAt > now) return settled.state
    this.settled.delete(hash)
    return undefined
  }

  /** Stores a lookup's result unless the generation moved since `generationAtStart`. */
  fill(hash: string, state: CachedKeyState, generationAtStart: number, now: number): boolean {
    if (generationAtStart !== this.generation) return false
    if (state.status === 'active') {
      if (!this.isTrusted(now)) return false
      setBounded(this.active, hash, { state, expiresAt: now + this.options.activeTtlMs }, this.options.maxEntries)
      return true
    }
    this.active.delete(hash)
    const ttl = state.status === 'unknown' ? this.options.unknownTtlMs : this.options.terminalTtlMs
    setBounded(this.settled, hash, { state, expiresAt: now + ttl }, this.options.maxEntries)
    return true
  }

  /** An invalidation: forget these keys entirely (the next lookup reads the revoker's marker). */
  drop(hashes: readonly string[]): void {
    this.generation++
    for (const hash of hashes) {
      this.active.delete(hash)
      this.settled.delete(hash)
    }
  }

  /** The subscription is (again) healthy: start from empty, then trust. */
  trust(now: number): void {
    this.active.clear()
    this.generation++
    this.trusted = true
    this.heartbeatAt = now
  }

  /** A heartbeat sent at `sentAt` was answered: every message published before it has arrived. */
  heartbeat(sentAt: number): void {
    if (sentAt > this.heartbeatAt) this.heartbeatAt = sentAt
  }

  /** The subscription is not healthy: active entries can no longer be trusted. */
  distrust(): void {
    this.active.clear()
    this.generation++
    this.trusted = false
  }

  /** Entry counts, for metrics and tests. */
  size(): { active: number; settled: number } {
    return { active: this.active.size, settled: this.settled.size }
  }
}
