/**
 * The in-process cache of key states, keyed by key hash. Three kinds of
 * entries, with different trust:
 *
 * - ended (revoked, deleted): a key never leaves these states, so they are
 *   served whenever present. They come from the invalidation log, from
 *   invalidation messages, from Redis markers and from Postgres. They are
 *   kept ENDED_TTL_MS, longer than any Redis "active" entry written before the
 *   key ended can live, so such an entry (left behind by a revoke that could
 *   not write to Redis) is never believed. A separate map: a flood of unknown
 *   keys cannot push them out. A revoked entry keeps its key's owner when
 *   known (for its usage: the key still exists for its tenant); a deleted
 *   one never has one.
 * - active: served only while the cache is current, i.e. the invalidation
 *   log follower's last successful poll was sent less than STALE_AFTER_MS
 *   ago. Losing currency drops every active entry; while not current none is
 *   stored, and Redis "active" entries are not believed either.
 * - unknown: negative entries, bounded, oldest dropped first.
 *
 * Besides the entries, the newest state version heard of per key that
 * changed (an invalidation's version: a roll, an allowlist or rate-limit
 * change, a new expiry), kept as long as ended entries and for the same
 * reason: a state older than it, from Redis (left behind by a change that
 * could not write there, or written back by someone) or from a lookup that
 * raced the change, is never believed or stored. Should more keys change
 * within that time than the pins hold, the oldest pin is dropped and Redis
 * active entries are not believed at all until it would have expired.
 *
 * `generation` changes whenever an entry is dropped or ended, or currency is
 * lost; a fill is skipped when the generation moved while its lookup was in
 * flight, so a lookup that raced a revoke can never put the key back; and the
 * forwarder re-checks a key whose generation moved while its body arrived.
 *
 * Times are milliseconds of a monotonic clock (performance.now()).
 */
import type { EndedKeyState, KeyState, TerminalStatus } from '@scoped/shared/key-state'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { stateVersion } from '@scoped/shared/key-state'

interface Entry<S extends KeyState = KeyState> {
  state: S
  expiresAt: number
}

export interface KeyCacheOptions {
  /** How long an active entry is served at most, even while current (bounds the effect of changes made outside the protocol). */
  activeTtlMs: number
  /** How long an unknown key is remembered. */
  unknownTtlMs: number
  /** How long an ended key is remembered. */
  endedTtlMs: number
  /** Entries per kind; the oldest is dropped beyond it. */
  maxEntries: number
  /** Ended entries kept at most (revocations are rare; a mass deletion must still fit). */
  maxEnded: number
}

/** Longer than a Redis active entry lives (300 s) plus the longest lookup that may have written it. */
export const ENDED_TTL_MS = 15 * 60_000

export const defaultKeyCacheOptions: KeyCacheOptions = Object.freeze({
  activeTtlMs: 60_000,
  unknownTtlMs: 60_000,
  endedTtlMs: ENDED_TTL_MS,
  maxEntries: 100_000,
  maxEnded: 1_000_000,
})

function setBounded<S extends KeyState>(map: Map<string, Entry<S>>, hash: string, entry: Entry<S>, max: number): void {
  map.delete(hash)
  if (map.size >= max) {
    const oldest = map.keys().next()
    if (oldest.done !== true) map.delete(oldest.value)
  }
  map.set(hash, entry)
}

export class KeyCache {
  /** Changes whenever an entry is dropped or ended, or currency is lost. */
  generation = 0
  private readonly active = new Map<string, Entry>()
  private readonly unknown = new Map<string, Entry>()
  private readonly ended = new Map<string, Entry<EndedKeyState>>()
  /** The newest state version heard of, per key that changed. */
  private readonly pins = new Map<string, { version: number; expiresAt: number }>()
  /** Until when Redis active entries are not believed at all, because a live pin was dropped for room. */
  private sharedDistrustedUntil = -Infinity
  private currentUntil = -Infinity
  private wasCurrent = false

  constructor(private readonly options: KeyCacheOptions = defaultKeyCacheOptions) {}

  /** Whether active states (in memory or in Redis) may be believed now; notices lost currency. */
  isCurrent(now: number): boolean {
    if (now < this.currentUntil) return true
    if (this.wasCurrent) {
      this.wasCurrent = false
      this.active.clear()
      this.generation++
    }
    return false
  }

  /** The follower applied the log up to a poll it sent at `sentAt`: current until `until`. */
  currentUntilTime(until: number): void {
    if (until > this.currentUntil) this.currentUntil = until
    this.wasCurrent = true
  }

  /** Not current any more, at once (the follower stopped). */
  lose(): void {
    this.currentUntil = -Infinity
    this.isCurrent(0)
  }

  get(hash: string, now: number): KeyState | undefined {
    const ended = this.ended.get(hash)
    if (ended !== undefined) {
      if (ended.expiresAt > now) return ended.state
      this.ended.delete(hash)
    }
    const active = this.active.get(hash)
    if (active !== undefined) {
      if (active.expiresAt > now && this.isCurrent(now)) return active.state
      this.active.delete(hash)
    }
    const unknown = this.unknown.get(hash)
    if (unknown === undefined) return undefined
    if (unknown.expiresAt > now) return unknown.state
    this.unknown.delete(hash)
    return undefined
  }

  /** Stores a lookup's result unless the generation moved since `generationAtStart`. */
  fill(hash: string, state: KeyState, generationAtStart: number, now: number): boolean {
    if (generationAtStart !== this.generation) return false
    switch (state.status) {
      case 'active':
        if (!this.isCurrent(now) || this.isStale(hash, stateVersion(state), now)) return false
        setBounded(this.active, hash, { state, expiresAt: now + this.options.activeTtlMs }, this.options.maxEntries)
        return true
      case 'unknown':
        setBounded(this.unknown, hash, { state, expiresAt: now + this.options.unknownTtlMs }, this.options.maxEntries)
        return true
      default:
        // A lookup that found the key ended tells nothing new to other lookups: no generation change.
        this.pin(hash, state.status, state.status === 'revoked' ? state.tenant : undefined, now)
        return true
    }
  }

  /**
   * The key ended (an invalidation, a marker, Postgres): from now on it is refused, whatever Redis says.
   * `tenant`: a revoked key's owner when the news says it (the log does).
   */
  end(hash: string, status: TerminalStatus, now: number, tenant?: Tenant): void {
    this.generation++
    this.pin(hash, status, tenant, now)
  }

  /**
   * Ends the key, keeping what was known of its owner: a revoked key's requests are still counted for its
   * tenant, so its owner is taken from the news, else from the ended or active state held (the same key:
   * a key's tenant never changes). A deleted key stays deleted, owned by no one (it no longer exists for
   * its tenant), whatever news of its earlier revocation arrives after.
   */
  private pin(hash: string, status: TerminalStatus, tenant: Tenant | undefined, now: number): void {
    const held = this.ended.get(hash)?.state
    const active = this.active.get(hash)?.state
    this.active.delete(hash)
    this.unknown.delete(hash)
    let state: EndedKeyState
    if (status === 'deleted' || held?.status === 'deleted') state = { status: 'deleted' }
    else {
      const owner = tenant ?? held?.tenant ?? (active?.status === 'active' ? active.tenant : undefined)
      state = owner === undefined ? { status } : { status, tenant: owner }
    }
    setBounded(this.ended, hash, { state, expiresAt: now + this.options.endedTtlMs }, this.options.maxEnded)
  }

  /** The key's record changed: forget what is cached so the next request reads it again. */
  forget(hash: string): void {
    this.generation++
    this.active.delete(hash)
    this.unknown.delete(hash)
  }

  /** The key's record changed to `version`: forgotten, and every state older than that refused from now on. */
  changed(hash: string, version: number | undefined, now: number): void {
    this.forget(hash)
    if (version === undefined) return
    const pinned = this.pins.get(hash)
    if (pinned !== undefined && pinned.expiresAt > now && pinned.version >= version) return
    this.pins.delete(hash)
    if (this.pins.size >= this.options.maxEnded) {
      const [oldestHash, oldest] = this.pins.entries().next().value!
      this.pins.delete(oldestHash)
      if (oldest.expiresAt > now) this.sharedDistrustedUntil = Math.max(this.sharedDistrustedUntil, oldest.expiresAt)
    }
    this.pins.set(hash, { version, expiresAt: now + this.options.endedTtlMs })
  }

  /** Whether an active state of `version` is older than a change heard of (it must not be believed or stored). */
  isStale(hash: string, version: number, now: number): boolean {
    const pinned = this.pins.get(hash)
    if (pinned === undefined) return false
    if (pinned.expiresAt <= now) {
      this.pins.delete(hash)
      return false
    }
    return version < pinned.version
  }

  /** Whether an active state read from Redis may be believed: the cache is current and the state no older than any change heard of. */
  believesShared(hash: string, state: KeyState, now: number): boolean {
    if (state.status !== 'active') return true
    return now >= this.sharedDistrustedUntil && this.isCurrent(now) && !this.isStale(hash, stateVersion(state), now)
  }

  /** Entry counts, for metrics and tests. */
  size(): { active: number; unknown: number; ended: number } {
    return { active: this.active.size, unknown: this.unknown.size, ended: this.ended.size }
  }
}
