/**
 * A fixed-window allowance per client address (an IPv6 client by its /64,
 * which one host can rotate through at will), shared between replicas
 * through Redis and enforced in each process all the same: after `limit`
 * counted events within `windowMs` of its first, a client is refused until
 * that window ends. The gateway's failed-authentication throttle and
 * agency-service's leaked-key report allowance are both one of these.
 *
 * `check` reads local state only, and `count` counts locally at once and
 * sends one atomic update to Redis without waiting for it (a small Lua
 * script: INCR, and PEXPIRE when the key has no expiry yet, then PTTL). When
 * the shared count has reached the limit, the client is marked blocked
 * locally until the shared window ends. A replica thus learns of the other
 * replicas' events only through its own next event from that client, so N
 * replicas together admit at most limit + N - 1 per window: the one that
 * reaches the limit blocks, and each of the N - 1 others admits at most one
 * more, whose update tells it the limit is reached. (Events in flight on one
 * replica at the same moment, before Redis has answered, can add to that.)
 * Each replica also enforces the limit on its own local count, so a client is
 * still throttled per replica when Redis is down, disconnected or erroring:
 * those updates are simply dropped (and reported to `onError`). It never
 * fails open into no limit at all.
 *
 * The Redis key is `${prefix}${name}:<hex SHA-256 of the client>`: an
 * address is personal data and never appears in a key name.
 *
 * Local state is bounded: at most `maxTracked` clients (100 000 by default;
 * the oldest is evicted first), expired entries are dropped as they are met,
 * and at most MAX_IN_FLIGHT Redis updates are pending at once (past that,
 * events are counted locally only). A flood of distinct addresses cannot
 * grow memory without bound.
 */
import { hash } from 'node:crypto'
import type { Redis } from 'ioredis'
import { clientGroup } from './ip-address.js'

export const DEFAULT_MAX_TRACKED = 100_000
const MAX_IN_FLIGHT = 1_024
/** How many expired entries one call may drop from the front of the map: amortized constant work. */
const SWEEP = 8

/** KEYS[1] the counter, ARGV[1] the window in ms; answers {count, pttl}. */
const INCREMENT = `
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`

export interface ClientThrottleOptions {
  /** What is counted, in the Redis key (`auth-fail`, `leak-report`): one counter per allowance. */
  name: string
  limit: number
  windowMs: number
  /** Shared state between replicas; without it each replica counts alone. Use a client with enableOfflineQueue: false. */
  redis?: Redis
  /** REDIS_KEY_PREFIX. */
  prefix?: string
  maxTracked?: number
  now?: () => number
  /** Told of every Redis update that failed (the throttle goes on locally). */
  onError?: (error: unknown) => void
}

export type ThrottleCheck = { blocked: false } | { blocked: true; retryAfterSeconds: number }

interface Entry {
  client: string
  /** Local events in the current window. */
  count: number
  windowEnd: number
  /** Set when Redis answered that the shared count reached the limit. */
  blockedUntil: number
}

export class ClientThrottle {
  readonly name: string
  readonly limit: number
  readonly windowMs: number
  readonly maxTracked: number
  private readonly redis: Redis | undefined
  private readonly prefix: string
  private readonly now: () => number
  private readonly onError: (error: unknown) => void
  private readonly entries = new Map<string, Entry>()
  /**
   * The entries in the order their windows started, oldest first, from
   * `head` on; a record whose entry has since been dropped or replaced is
   * skipped. (Deleting from the front of a Map and iterating it again would
   * cost time proportional to the deleted entries V8 keeps until a rehash.)
   */
  private order: Entry[] = []
  private head = 0
  private readonly inFlight = new Set<Promise<void>>()

  constructor(options: ClientThrottleOptions) {
    this.name = options.name
    this.limit = options.limit
    this.windowMs = options.windowMs
    this.maxTracked = options.maxTracked ?? DEFAULT_MAX_TRACKED
    if (!Number.isInteger(this.limit) || this.limit < 1) throw new RangeError('limit must be a positive integer')
    if (!Number.isInteger(this.windowMs) || this.windowMs < 1) throw new RangeError('windowMs must be a positive integer')
    if (!Number.isInteger(this.maxTracked) || this.maxTracked < 1) throw new RangeError('maxTracked must be a positive integer')
    this.redis = options.redis
    this.prefix = options.prefix ?? 'sak:'
    this.now = options.now ?? Date.now
    this.onError = options.onError ?? (() => undefined)
  }

  /** Whether the client (an IPv6 client by its /64) is refused now. Local state only: no Redis round trip. */
  check(address: string, nowMs: number = this.now()): ThrottleCheck {
    const client = clientGroup(address)
    const entry = this.entries.get(client)
    if (entry === undefined) return { blocked: false }
    const until = Math.max(entry.blockedUntil, entry.count >= this.limit ? entry.windowEnd : 0)
    if (until > nowMs) return { blocked: true, retryAfterSeconds: Math.max(1, Math.ceil((until - nowMs) / 1000)) }
    if (entry.windowEnd <= nowMs && entry.blockedUntil <= nowMs) this.entries.delete(client)
    return { blocked: false }
  }

  /** Counts one event of the client; with Redis, also updates the shared count, without waiting. */
  count(address: string): void {
    const client = clientGroup(address)
    const now = this.now()
    this.sweep(now)
    let entry = this.entries.get(client)
    if (entry !== undefined && entry.windowEnd <= now && entry.blockedUntil <= now) {
      this.entries.delete(client)
      entry = undefined
    }
    if (entry === undefined) {
      entry = { client, count: 0, windowEnd: now + this.windowMs, blockedUntil: 0 }
      this.entries.set(client, entry)
      this.order.push(entry)
      while (this.entries.size > this.maxTracked) {
        const oldest = this.oldest()
        if (oldest === undefined) break // cannot happen: every entry has a record
        this.drop(oldest)
      }
      this.compact()
    }
    entry.count++
    if (this.redis !== undefined && this.inFlight.size < MAX_IN_FLIGHT) this.share(this.redis, client)
  }

  /** Resolves when every Redis update sent so far has been answered (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all(this.inFlight)
  }

  /** How many client addresses are tracked locally. */
  get tracked(): number {
    return this.entries.size
  }

  /** The Redis key of a client: never the address itself. */
  redisKey(client: string): string {
    return `${this.prefix}${this.name}:${hash('sha256', client, 'hex')}`
  }

  private share(redis: Redis, client: string): void {
    const update = (async () => {
      try {
        const [count, ttl] = (await redis.eval(INCREMENT, 1, this.redisKey(client), this.windowMs)) as [number, number]
        if (count < this.limit) return
        const entry = this.entries.get(client)
        if (entry === undefined) return // evicted meanwhile; its next event asks again
        entry.blockedUntil = Math.max(entry.blockedUntil, this.now() + Math.min(Math.max(ttl, 0), this.windowMs))
      } catch (error) {
        this.onError(error)
      }
    })()
    this.inFlight.add(update)
    void update.finally(() => this.inFlight.delete(update))
  }

  /** The live entry whose window started first, or undefined; skips (and forgets) records of dropped entries. */
  private oldest(): Entry | undefined {
    while (this.head < this.order.length) {
      const entry = this.order[this.head] as Entry
      if (this.entries.get(entry.client) === entry) return entry
      this.head++
    }
    return undefined
  }

  private drop(entry: Entry): void {
    this.entries.delete(entry.client)
    this.head++
  }

  /** Drops up to SWEEP expired entries from the front (the oldest windows). */
  private sweep(now: number): void {
    for (let dropped = 0; dropped < SWEEP; dropped++) {
      const entry = this.oldest()
      if (entry === undefined || entry.windowEnd > now || entry.blockedUntil > now) return
      this.drop(entry)
    }
  }

  /** Keeps the order list within twice the entries it can hold: amortized constant work per new entry. */
  private compact(): void {
    if (this.head > 1_024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head)
      this.head = 0
    }
    if (this.order.length > 2 * this.maxTracked + 1_024) {
      this.order = this.order.slice(this.head).filter((entry) => this.entries.get(entry.client) === entry)
      this.head = 0
    }
  }
}
