/**
 * Usage counting and the request log, from the answer of every request the
 * gateway attributes to a key (its tenant is known, whatever the outcome),
 * to Postgres in batches. On the request path: a count in memory
 * (usage-counts.ts) and, for a request the log keeps, one small object; no
 * I/O, no lock.
 *
 * Every `intervalMs` (and at stop) the counts so far become a batch, cut by
 * agency into parts written at the same time (usage-parts.ts), each with the
 * next sequence number. A part that fails stays in flight, retried as it is
 * (same sequence, same rows) until it is written: its sequence makes it
 * idempotent (usage-store.ts), so a commit whose answer was lost counts once.
 * Meanwhile counting goes on in memory, bounded by `maxCells` (the parts in
 * flight included); what is dropped past the bound is counted in
 * gateway_usage_dropped_total and said in the log at the next flush.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Pool, PoolClient } from '@scoped/shared/db'
import type { Logger } from '@scoped/shared/logger'
import type { RequestLogRow } from '@scoped/shared/request-log-store'
import { expireRequestLog, writeRequestLog } from '@scoped/shared/request-log-store'
import type { UsageRetention, UsageRow } from '@scoped/shared/usage-store'
import { expireUsage, rollUpUsage, writeUsageBatch } from '@scoped/shared/usage-store'
import { withDeadline } from '@scoped/shared/deadline'
import type { GatewayMetrics } from '../metrics.js'
import { outcomeOfStatus } from '../outcomes.js'
import { loggablePath } from '../request-log.js'
import type { Route } from '../route-map.js'
import { batchRows } from './usage-batch.js'
import { UsageCounts } from './usage-counts.js'
import { splitByAgency } from './usage-parts.js'
import { USAGE_OUTCOME } from './usage-outcome.js'

/** Which requests the log keeps: refusals and 5xx answers, every request of a key, or none. */
export type RequestLogMode = 'errors' | 'all' | 'off'

export interface UsageOptions {
  /** USAGE=off: nothing counted nor logged, no flush (the bench's baseline; a replica that must not write). */
  counting: boolean
  intervalMs: number
  maxCells: number
  /** How many parts of a busy batch are written at the same time, each on a connection of its own (usage-parts.ts). */
  writers: number
  /** A write that takes longer is given up (and its batch retried, safely: it is idempotent). */
  writeDeadlineMs: number
  retention: UsageRetention
  requestLog: { mode: RequestLogMode; maxPending: number; capPerAgency: number; maxAgeSeconds: number }
}

export const DEFAULT_USAGE_OPTIONS: UsageOptions = {
  counting: true,
  intervalMs: 5_000,
  maxCells: 250_000,
  writers: 2,
  writeDeadlineMs: 10_000,
  retention: { minutes: 7 * 86_400, hours: 90 * 86_400, days: 400 * 86_400 },
  requestLog: { mode: 'errors', maxPending: 20_000, capPerAgency: 100_000, maxAgeSeconds: 30 * 86_400 },
}

/** How often a replica drops the partitions past their retention. */
const EXPIRY_INTERVAL_MS = 3_600_000
/**
 * How often a replica offers to roll up the hours that are over (one replica rolls; the others' calls answer at
 * once), how long after its end an hour is rolled (so that the replicas' last flushes of it are in; a later row is
 * still counted, added to the rolled hour by its writer), and how many hours one turn rolls at most.
 */
const ROLLUP_INTERVAL_MS = 60_000
const ROLLUP_GRACE_MS = 60_000
const ROLLUP_MAX_HOURS = 24

/** One part of a batch, written in a transaction of its own. */
interface Part {
  seq: number
  /** Minute rows (their hours and days are rolled up later). */
  rows: UsageRow[]
  /** Answers counted in them. */
  requests: number
  log: RequestLogRow[]
}

export class UsageRecorder {
  private readonly counts: UsageCounts
  private log: RequestLogRow[] = []
  private droppedLogRows = 0
  /** The parts of the batch in flight not written yet, and the cells they hold. */
  private inFlight: Part[] = []
  private heldCells = 0
  private seq = 0
  private timer: NodeJS.Timeout | undefined
  private flushing: Promise<void> = Promise.resolve()
  private lastExpiry = 0
  private rollupTimer: NodeJS.Timeout | undefined
  /** The connection of the rollup under way: at stop it is closed (the rollup's transaction is undone; the next replica redoes it). */
  private rolling: PoolClient | null = null
  private rollingUp = false
  private stopped = false
  /** Once stopping: when the stop gives up (epoch ms); no write may outlast it, so a Postgres that hangs still ends in "dropped", said. */
  private stopBy = Infinity

  constructor(
    private readonly pool: Pool,
    private readonly logger: Logger,
    private readonly metrics: GatewayMetrics,
    private readonly routes: readonly Route[],
    private readonly replicaId: string,
    private readonly options: UsageOptions = DEFAULT_USAGE_OPTIONS,
  ) {
    this.counts = new UsageCounts(options.maxCells, () => this.heldCells)
  }

  /**
   * At the end of a request (onResponse): counted when a key's tenant is known and the answer is attributed
   * to it (usage-outcome.ts), logged when the log keeps it. A deleted key's request is counted for no one:
   * the key no longer exists for its tenant (even when the request began while it did and the forwarder's
   * second check refused it).
   */
  record(request: FastifyRequest, reply: FastifyReply): void {
    const decision = request.gateway
    if (decision === null || !this.options.counting) return
    if (decision.tenant === null) {
      // A revoked key whose owner this replica could not learn (Postgres away): refused, and its count said lost, never silently.
      if (decision.kind === 'key-refused' && decision.state.status === 'revoked') this.metrics.countUsageDropped('counts', 1)
      return
    }
    const status = reply.statusCode
    const outcome = USAGE_OUTCOME[decision.outcome ?? outcomeOfStatus(status)]
    if (outcome === null) return
    const ms = Number.isFinite(reply.elapsedTime) ? reply.elapsedTime : 0
    const now = Date.now()
    const { tenant } = decision
    this.counts.count(now, tenant, decision.route === null ? null : decision.route.index, outcome, status, ms)
    const mode = this.options.requestLog.mode
    if (mode === 'off' || (mode === 'errors' && outcome === 'served' && status < 500)) return
    if (this.log.length >= this.options.requestLog.maxPending) {
      this.droppedLogRows++
      return
    }
    this.log.push({
      at: now,
      requestId: request.id,
      agencyId: tenant.agencyId,
      keyId: tenant.keyId,
      subAccountId: tenant.subAccountId,
      method: request.method,
      path: loggablePath(request),
      status,
      outcome,
      durationMs: Math.round(ms * 1000) / 1000,
      clientAddress: decision.client === '' ? null : decision.client,
    })
  }

  start(): void {
    if (!this.options.counting) return
    this.timer = setInterval(() => void this.flush(), this.options.intervalMs)
    this.timer.unref()
    this.rollupTimer = setInterval(() => void this.rollUp(), ROLLUP_INTERVAL_MS)
    this.rollupTimer.unref()
  }

  /**
   * Rolls up the hours over since ROLLUP_GRACE_MS (usage-store.ts), on a connection of its own and never inside
   * a flush: a long rollup delays no count. One turn at a time; failures are said and tried again at the next.
   */
  async rollUp(now = Date.now()): Promise<number> {
    if (this.rollingUp || this.stopped) return 0
    this.rollingUp = true
    try {
      return await this.rollUpOnce(now)
    } finally {
      this.rollingUp = false
    }
  }

  private async rollUpOnce(now: number): Promise<number> {
    let client: PoolClient
    try {
      client = await this.pool.connect()
    } catch (error) {
      return this.rollUpFailed(error)
    }
    if (this.stopped) {
      client.release()
      return 0
    }
    this.rolling = client
    try {
      this.metrics.countRoundTrip('postgres')
      const hours = await rollUpUsage(client, new Date(now - ROLLUP_GRACE_MS), ROLLUP_MAX_HOURS)
      if (hours > 0) this.logger.debug({ hours }, 'usage hours rolled up')
      this.metrics.countUsageRollup('rolled', hours)
      return hours
    } catch (error) {
      return this.rollUpFailed(error)
    } finally {
      // Unless the stop took it (and closed it, undoing the rollup's transaction).
      if (this.rolling === client) {
        this.rolling = null
        client.release()
      }
    }
  }

  private rollUpFailed(error: unknown): number {
    if (this.stopped) return 0
    this.metrics.countUsageRollup('error')
    this.logger.warn({ err: error }, 'could not roll up usage hours; will try again')
    return 0
  }

  /** Writes the batch in flight, then what was counted since; flushes never overlap. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.write())
    return this.flushing
  }

  /**
   * Stops the timer and writes everything, retrying (Postgres may be away) until `deadlineMs` from now;
   * what is still unwritten then is said in the log and counted as dropped.
   */
  async stop(deadlineMs: number): Promise<void> {
    clearInterval(this.timer)
    clearInterval(this.rollupTimer)
    this.stopped = true
    const rolling = this.rolling
    this.rolling = null
    rolling?.release(new Error('gateway stopping'))
    const until = Date.now() + deadlineMs
    this.stopBy = until
    await this.flush()
    while (this.pending() > 0 && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      await this.flush()
    }
    const lost = this.pending()
    if (lost > 0) {
      this.metrics.countUsageDropped('counts', lost)
      this.logger.error({ requests: lost }, 'usage counts not written before the gateway stopped: dropped')
    }
  }

  /** Answers counted but not yet written (the batch in flight and what is counted since). */
  pending(): number {
    return this.inFlight.reduce((sum, part) => sum + part.requests, 0) + this.counts.requests
  }

  /**
   * The batch in flight (held while Postgres was away), then, once it is written, what was counted since: a
   * flush after an outage leaves nothing for the next interval, so usage stays within its bound (an interval).
   */
  private async write(): Promise<void> {
    for (let batches = 0; batches < 2; batches++) {
      if (this.inFlight.length === 0) this.hold(this.cut())
      if (this.inFlight.length === 0) break
      const parts = this.inFlight
      const written = await Promise.all(parts.map((part) => this.writePart(part)))
      this.hold(parts.filter((_, i) => !written[i]))
      if (this.inFlight.length > 0) return
    }
    await this.expire()
  }

  private hold(parts: Part[]): void {
    this.inFlight = parts
    this.heldCells = parts.reduce((sum, part) => sum + part.rows.length, 0)
  }

  /** What was counted since the last batch, as the next one's parts; none when there is nothing. */
  private cut(): Part[] {
    const taken = this.counts.take()
    this.reportDropped(taken.dropped)
    const log = this.log
    this.log = []
    if (taken.cells === 0 && log.length === 0) return []
    return splitByAgency(batchRows(taken.counts, this.routes), log, this.options.writers).map(({ rows, log }) => ({
      seq: ++this.seq,
      rows,
      requests: rows.reduce((sum, row) => sum + row.requests, 0),
      log,
    }))
  }

  private reportDropped(counts: number): void {
    const logRows = this.droppedLogRows
    this.droppedLogRows = 0
    if (counts > 0) this.metrics.countUsageDropped('counts', counts)
    if (logRows > 0) this.metrics.countUsageDropped('request-log', logRows)
    if (counts > 0 || logRows > 0) this.logger.error({ counts, logRows }, 'usage memory bound reached while batches could not be written: counts dropped')
  }

  private async writePart(part: Part): Promise<boolean> {
    const { rows, log, requests } = part
    const cap = this.options.requestLog.capPerAgency
    try {
      this.metrics.countRoundTrip('postgres')
      const deadlineMs = Math.max(1, Math.min(this.options.writeDeadlineMs, this.stopBy - Date.now()))
      await withDeadline(
        writeUsageBatch(this.pool, {
          replicaId: this.replicaId,
          seq: part.seq,
          minutes: rows,
          alsoWrite: (client) => writeRequestLog(client, log, cap),
          statementTimeoutMs: deadlineMs,
        }),
        deadlineMs,
        'writing usage',
      )
      this.metrics.countUsageFlush(true)
      return true
    } catch (error) {
      this.metrics.countUsageFlush(false)
      this.logger.warn({ err: error, requests, seq: part.seq }, 'could not write usage; will retry the same batch')
      return false
    }
  }

  /** Retention, at most once an hour per replica: whole partitions dropped. */
  private async expire(): Promise<void> {
    const now = Date.now()
    if (now - this.lastExpiry < EXPIRY_INTERVAL_MS) return
    this.lastExpiry = now
    try {
      const dropped = (await expireUsage(this.pool, this.options.retention)) + (await expireRequestLog(this.pool, this.options.requestLog.maxAgeSeconds))
      if (dropped > 0) this.logger.info({ partitions: dropped }, 'usage and request log partitions past their retention dropped')
    } catch (error) {
      this.logger.warn({ err: error }, 'could not expire usage partitions; will try again')
    }
  }
}
