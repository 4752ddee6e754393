/**
 * Telling every gateway replica that keys have ended (revoked, deleted) or
 * changed, after the transaction that did it has committed, and confirming
 * that each one has dropped them. The promise: when a revoke or delete has
 * returned successfully, the very next request with that key gets 401 on
 * every replica; when that cannot be confirmed, the caller says so, and the
 * key is still refused everywhere within the bound below.
 *
 * Two paths, the second never depending on Redis:
 *   1. fast, with Redis: overwrite the keys' cache entries with MAC'd terminal
 *      markers, publish a MAC'd message naming the keys, and collect MAC'd
 *      acknowledgements, each sent by a replica after it has dropped them;
 *   2. backstop, in Postgres: the revoking transaction wrote the keys into
 *      key_invalidations (by trigger). Every replica polls that log every
 *      POLL_INTERVAL_MS and records in gateway_replicas the snapshot it has
 *      applied; it trusts its caches only for STALE_AFTER_MS after a poll it
 *      sent succeeded. The revoker waits until every replica seen within
 *      LIVE_WINDOW_MS has acknowledged (path 1) or applied the transaction
 *      (path 2). A replica not seen for that long has already stopped
 *      trusting its caches, so it cannot serve the key from them.
 *
 * Bound: a revoked or deleted key is refused by every replica at most
 * STALE_AFTER_MS after the commit, whatever Redis, the revoker or the
 * network do; in practice at once (path 1) or within two poll intervals.
 * Every step has a deadline, so `invalidate` returns within DEADLINE_MS.
 */
import type { Redis } from 'ioredis'
import type { Pool } from './db.js'
import { ApiError } from './errors.js'
import type { KeyInvalidation, KeyState, KeyStateCodec } from './key-state.js'
import { ACK_LIST_TTL_SECONDS, isTerminal, newInvalidationMessage, redisNames, redisTtlSeconds } from './key-state.js'
import { replicasBehind } from './key-store.js'
import { withStateVersions } from './key-versions.js'
import { withDeadline } from './deadline.js'

/** How often each gateway replica polls the invalidation log. */
export const POLL_INTERVAL_MS = 200
/** How long after sending its last successful poll a replica still trusts its caches. */
export const STALE_AFTER_MS = 2_000
/** A replica seen in the registry more recently than this is waited for; older ones have stopped trusting. */
export const LIVE_WINDOW_MS = STALE_AFTER_MS + 500
/** The longest a revoke waits for confirmation before answering that it could not confirm. */
export const DEADLINE_MS = 10_000
/** How long the fast path waits for acknowledgements before leaving the rest to Postgres. */
const ACK_WAIT_MS = 1_000
const RECHECK_INTERVAL_MS = 100
/**
 * A recheck of the registry starts only with at least this much of the deadline left: one cut
 * short by the deadline itself would report a healthy but busy Postgres as the problem.
 */
const MIN_RECHECK_MS = 300

export interface InvalidationReport {
  /** True when every live replica has dropped the keys. */
  confirmed: boolean
  /** Replicas that acknowledged through Redis. */
  acknowledged: number
  /** Live replicas that had not confirmed by the deadline. */
  unconfirmed: string[]
  /** What went wrong along the way (Redis, Postgres), for the message and the logs. */
  problems: string[]
}

export interface KeyInvalidator {
  /** `xid`: the committed transaction that ended or changed the keys (currentTransactionId). */
  invalidate(keys: readonly KeyInvalidation[], xid: string): Promise<InvalidationReport>
  close(): Promise<void>
}

/** The fast path's Redis clients: one for commands, one of its own for BLPOP, which holds its connection while it waits. */
export interface RedisChannel {
  commands: Redis
  blocking: Redis
  prefix: string
  codec: KeyStateCodec
  /** Settles once both clients are connected (or failed to); the revoke itself never waits on it before committing. */
  connected?: Promise<void>
}

/**
 * Raised by callers (the key service) when a change committed but was not
 * confirmed: a 503 whose message says what was saved and what was not
 * confirmed, so the CLI, the console and the API all say it plainly.
 */
export class InvalidationNotConfirmed extends ApiError {
  constructor(
    readonly report: InvalidationReport,
    what: string,
  ) {
    super(
      'serviceUnavailable',
      `${what}, but not every gateway replica confirmed dropping it (${describeProblems(report)}); ` +
        `every replica refuses it within ${STALE_AFTER_MS / 1000} s of the change all the same`,
    )
    this.name = 'InvalidationNotConfirmed'
  }
}

/** What went wrong with a confirmation, in a sentence's middle. */
export function describeProblems(report: InvalidationReport): string {
  const parts = [...report.problems]
  if (report.unconfirmed.length > 0) parts.push(`not confirmed by ${report.unconfirmed.length} replica(s): ${report.unconfirmed.slice(0, 5).join(', ')}`)
  return parts.length === 0 ? 'no confirmation' : parts.join('; ')
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

export class KeyRevocationNotifier implements KeyInvalidator {
  constructor(
    private readonly pool: Pool,
    private readonly redis: RedisChannel | null,
    private readonly options: { deadlineMs?: number; ackWaitMs?: number; liveWindowMs?: number } = {},
  ) {}

  async invalidate(keys: readonly KeyInvalidation[], xid: string): Promise<InvalidationReport> {
    const report: InvalidationReport = { confirmed: false, acknowledged: 0, unconfirmed: [], problems: [] }
    if (keys.length === 0) return { ...report, confirmed: true }
    const deadline = Date.now() + (this.options.deadlineMs ?? DEADLINE_MS)
    const acknowledgedBy = new Set<string>()
    if (this.redis !== null) {
      // The acknowledgement wait plus time for the commands, but never more than half of what is left:
      // the Postgres confirmation (the backstop) always gets the other half, and the whole stays within the deadline.
      const budget = Math.max(0, Math.min((this.options.ackWaitMs ?? ACK_WAIT_MS) + 2_000, (deadline - Date.now()) / 2))
      // Changed keys go with their versions; when Postgres cannot say them, acknowledgements confirm nothing (the log does).
      const versioned = await withDeadline(withStateVersions(this.pool, keys), budget, 'reading state versions').catch(() => undefined)
      try {
        await withDeadline(
          this.fastPath(this.redis, versioned ?? keys, versioned === undefined ? new Set() : acknowledgedBy, report),
          budget,
          'the Redis invalidation',
        )
      } catch (error) {
        report.problems.push(`Redis: ${errorText(error)}`)
      }
      report.acknowledged = acknowledgedBy.size
    }
    const liveWindowMs = this.options.liveWindowMs ?? LIVE_WINDOW_MS
    let postgresProblem: string | undefined
    for (;;) {
      try {
        const behind = await withDeadline(replicasBehind(this.pool, xid, liveWindowMs), Math.max(1, deadline - Date.now()), 'reading the replica registry')
        report.unconfirmed = behind.filter((id) => !acknowledgedBy.has(id))
        postgresProblem = undefined
        if (report.unconfirmed.length === 0) return { ...report, confirmed: true }
      } catch (error) {
        postgresProblem = `Postgres: ${errorText(error)}`
      }
      if (deadline - Date.now() < RECHECK_INTERVAL_MS + MIN_RECHECK_MS) break
      await sleep(RECHECK_INTERVAL_MS)
    }
    if (postgresProblem !== undefined) report.problems.push(postgresProblem)
    return report
  }

  /** Markers, message, acknowledgements; each step that fails is noted and the next still tried. */
  private async fastPath(redis: RedisChannel, keys: readonly KeyInvalidation[], acknowledgedBy: Set<string>, report: InvalidationReport): Promise<void> {
    await redis.connected
    const names = redisNames(redis.prefix)
    const now = Date.now()
    const markers = redis.commands.multi()
    for (const key of keys) {
      // A terminal marker replaces whatever entry there was (gateways never write over one); a changed key is forgotten, and its version refuses anything older.
      if (isTerminal(key.state)) {
        const ttl = redisTtlSeconds.terminal
        // A revoked key's marker names its owner when the revoker knows it, so its refusals are counted for it (key-state.ts).
        const state: KeyState = key.state === 'revoked' && key.tenant !== undefined ? { status: 'revoked', tenant: key.tenant } : { status: key.state }
        markers.set(names.cacheEntry(key.hash), redis.codec.encodeEntry(key.hash, state, now + ttl * 1000), 'EX', ttl)
      } else {
        markers.del(names.cacheEntry(key.hash))
      }
    }
    try {
      const results = await markers.exec()
      const failed = results?.find(([error]) => error !== null)?.[0]
      if (failed) report.problems.push(`Redis markers not written: ${errorText(failed)}`)
    } catch (error) {
      report.problems.push(`Redis markers not written: ${errorText(error)}`)
    }
    const message = newInvalidationMessage(keys)
    const subscribers = await redis.commands.publish(names.channel, redis.codec.encodeMessage(message))
    const ackList = names.acknowledgements(message.id)
    const until = Date.now() + (this.options.ackWaitMs ?? ACK_WAIT_MS)
    let popped = 0
    while (popped < subscribers) {
      const remainingSeconds = (until - Date.now()) / 1000
      if (remainingSeconds <= 0) break
      const item = await redis.blocking.blpop(ackList, Math.max(remainingSeconds, 0.01))
      if (item === null) break
      popped++
      const replicaId = redis.codec.decodeAck(message.id, item[1])
      // A forged acknowledgement is ignored: it names no replica, so it confirms nothing.
      if (replicaId !== undefined) acknowledgedBy.add(replicaId)
    }
    await redis.commands.del(ackList).catch(() => undefined)
  }

  async close(): Promise<void> {
    this.redis?.commands.disconnect()
    this.redis?.blocking.disconnect()
  }
}

/** A gateway replica's acknowledgement that it has dropped the message's keys. */
export async function acknowledgeInvalidation(commands: Redis, prefix: string, codec: KeyStateCodec, invalidationId: string, replicaId: string): Promise<void> {
  const list = redisNames(prefix).acknowledgements(invalidationId)
  await commands.multi().rpush(list, codec.encodeAck(invalidationId, replicaId)).expire(list, ACK_LIST_TTL_SECONDS).exec()
}
